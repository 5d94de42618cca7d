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
		agrees(t, &s, ref)
	}
}

// agrees checks s against ref, a plain set of the same sequences: the
// lowest held, how many, and that the lowest is held.
func agrees(t *testing.T, s *seqSet, ref map[uint64]bool) {
	t.Helper()
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
	if wantOK {
		require.True(t, s.has(low))
	}
}

// TestSeqSetBounded: a node holding one old envelope while it acknowledges
// many newer ones keeps a slice the size of what it holds, and so does one
// that holds a few at a time for ever.
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
	require.Less(t, len(s.q), 200)

	s = newSeqSet()
	for q := uint64(1); q < 100_000; q++ {
		s.add(q)
		if q > 3 {
			s.remove(q - 3)
		}
		low, ok := s.min()
		require.True(t, ok)
		want := uint64(1)
		if q > 3 {
			want = q - 2
		}
		require.Equal(t, want, low)
		require.Equal(t, int(min(q, 3)), s.len())
	}
	require.Less(t, len(s.q), 200)
}

// TestSeqSetInOrder: sequences added in increasing order, as a node is
// given them, and let go in any order: the lowest held and membership
// agree with a plain set throughout.
func TestSeqSetInOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	s := newSeqSet()
	ref := map[uint64]bool{}
	next := uint64(1)
	for i := 0; i < 50000; i++ {
		if r.IntN(2) == 0 || len(ref) == 0 {
			next += uint64(r.IntN(3)) + 1
			s.add(next)
			ref[next] = true
		} else {
			var q uint64
			for q = range ref {
				break
			}
			s.remove(q)
			delete(ref, q)
			require.False(t, s.has(q))
		}
		agrees(t, &s, ref)
	}
}
