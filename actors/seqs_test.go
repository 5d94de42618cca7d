package actors

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSeqSetMin checks the lowest held sequence against a plain scan, over
// random adds and removes (out of order, repeated, of sequences not held).
func TestSeqSetMin(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	s := newSeqSet()
	ref := map[uint64]bool{}
	for i := 0; i < 20000; i++ {
		q := uint64(r.IntN(3000)) + 1
		if r.IntN(3) == 0 {
			s.add(q)
			ref[q] = true
		} else {
			s.remove(q)
			delete(ref, q)
		}
		low, ok := s.min()
		want, wantOK := uint64(0), false
		for q := range ref {
			if !wantOK || q < want {
				want, wantOK = q, true
			}
		}
		require.Equal(t, wantOK, ok)
		require.Equal(t, want, low)
		require.Equal(t, len(ref), s.len())
	}
}

// TestSeqSetBounded: a node holding one old envelope while it acknowledges
// many newer ones keeps a heap the size of what it holds.
func TestSeqSetBounded(t *testing.T) {
	s := newSeqSet()
	s.add(1)
	for q := uint64(2); q < 100_000; q++ {
		s.add(q)
		s.remove(q)
		low, ok := s.min()
		require.True(t, ok)
		require.Equal(t, uint64(1), low)
	}
	require.Less(t, len(s.h), 100)
}
