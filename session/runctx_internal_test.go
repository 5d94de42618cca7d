package session

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// A chain of contexts, each a few pairs over the one before, is made only
// when read, then equals the contexts a map updated step by step gives —
// at every step, read in any order — and no chain of contexts not made
// grows past maxLazyDepth.
func TestLazyContextsEqualEagerOnes(t *testing.T) {
	const n = 3*maxLazyDepth + 7
	want := make([]map[string]string, n)
	got := make([]*ctxVal, n)
	eager := map[string]string{}
	var base *ctxVal
	for i := range n {
		kvs := []*pb.KV{{Key: "node", Value: "n" + strconv.Itoa(i)}, {Key: "k" + strconv.Itoa(i%5), Value: strconv.Itoa(i)}}
		if i == 0 {
			kvs = append(kvs, &pb.KV{Key: "goal", Value: "g"})
			base = nil // the first is whole
		}
		for _, kv := range kvs {
			eager[kv.GetKey()] = kv.GetValue()
		}
		want[i] = map[string]string{}
		for k, v := range eager {
			want[i][k] = v
		}
		got[i] = newCtx(base, kvs)
		require.LessOrEqual(t, got[i].depth, maxLazyDepth, "step %d", i)
		base = got[i]
	}
	require.False(t, got[n-2].made, "the last ones are not made before they are read")
	// The middle one first, then all: each equals its eager context, and
	// reading a later one does not change an earlier one.
	mid := n / 2
	require.Equal(t, want[mid], whole(got[mid].get()))
	for i := n - 1; i >= 0; i-- {
		require.Equal(t, want[i], whole(got[i].get()), "step %d", i)
		require.True(t, got[i].made)
	}
	require.Equal(t, want[mid], whole(got[mid].get()))
	var none *ctxVal
	require.Nil(t, none.get(), "no context")
}

// recordKey is the zero-padded key the store's readers sort and parse.
func TestRecordKeyIsZeroPadded(t *testing.T) {
	for _, seq := range []uint64{0, 1, 9, 10, 4096, 999_999_999_999, 1_000_000_000_000, 18446744073709551615} {
		require.Equal(t, fmt.Sprintf("journal.%012d", seq), recordKey(seq))
	}
}
