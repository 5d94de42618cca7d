package session

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// A node's consumed envelopes are forgotten lowest sequence first, whether
// they were consumed in stream order (the list) or not (the heap), mixed
// in any way: the same as a sorted reference.
func TestConsumedHeapOrder(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		var h consumedHeap
		var ref []uint64
		next := uint64(1)
		for range 500 {
			switch r := rnd.IntN(10); {
			case r < 5: // in order
				next += uint64(rnd.IntN(3))
				h.push(ConsumedEnvelope{ID: strconv.FormatUint(next, 10), Node: "n", Seq: next})
				ref = append(ref, next)
			case r < 7: // out of order
				seq := uint64(rnd.IntN(int(next) + 1))
				h.push(ConsumedEnvelope{ID: strconv.FormatUint(seq, 10), Node: "n", Seq: seq})
				ref = append(ref, seq)
			default:
				slices.Sort(ref)
				low, ok := h.min()
				require.Equal(t, len(ref) > 0, ok, "round %d", round)
				if ok {
					require.Equal(t, ref[0], low.Seq, "round %d", round)
					h.pop()
					ref = ref[1:]
				}
			}
			require.Equal(t, len(ref), h.Len(), "round %d", round)
		}
		var all []uint64
		for _, c := range h.appendTo(nil) {
			all = append(all, c.Seq)
		}
		slices.Sort(all)
		slices.Sort(ref)
		require.Equal(t, ref, all, "round %d: what is kept", round)
	}
}
