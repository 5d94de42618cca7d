package actors

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// The window remembers the last size ids, whether it is still growing or
// already a ring, and forgets the oldest first.
func TestDedupWindow(t *testing.T) {
	d := newDedupWindow(3)
	require.True(t, d.first("a"))
	require.False(t, d.first("a"))
	require.True(t, d.first("b"))
	require.True(t, d.first("c"))
	require.False(t, d.first("b"), "full, nothing forgotten yet")
	require.True(t, d.first("d"), "the fourth id")
	require.False(t, d.has("a"), "the oldest is forgotten")
	require.True(t, d.has("b") && d.has("c") && d.has("d"))
	for i := range 10 {
		require.True(t, d.first(fmt.Sprint(i)))
	}
	require.Len(t, d.seen, 3)
	require.True(t, d.has("7") && d.has("8") && d.has("9"))
	d.add("9")
	require.Len(t, d.seen, 3)
}
