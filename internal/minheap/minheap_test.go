package minheap

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func less(a, b int) bool { return a < b }

// TestOrder: what is pushed pops in order, from a heap built by Push or
// by Init, with duplicates.
func TestOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 50 {
		in := make([]int, n)
		for i := range in {
			in[i] = r.IntN(20)
		}
		want := slices.Sorted(slices.Values(in))

		var h []int
		for _, x := range in {
			Push(&h, x, less)
		}
		built := slices.Clone(in)
		Init(built, less)
		for _, h := range []*[]int{&h, &built} {
			var got []int
			for len(*h) > 0 {
				got = append(got, Pop(h, less))
			}
			if !slices.Equal(got, want) {
				t.Fatalf("popped %v, want %v", got, want)
			}
		}
	}
}

// TestInterleaved: pushes between pops keep the order.
func TestInterleaved(t *testing.T) {
	var h []int
	for _, x := range []int{5, 3, 8} {
		Push(&h, x, less)
	}
	if x := Pop(&h, less); x != 3 {
		t.Fatalf("popped %d, want 3", x)
	}
	Push(&h, 1, less)
	Push(&h, 9, less)
	var got []int
	for len(h) > 0 {
		got = append(got, Pop(&h, less))
	}
	if want := []int{1, 5, 8, 9}; !slices.Equal(got, want) {
		t.Fatalf("popped %v, want %v", got, want)
	}
}

func TestNoAllocation(t *testing.T) {
	h := make([]uint64, 0, 64)
	lessU := func(a, b uint64) bool { return a < b }
	if n := testing.AllocsPerRun(100, func() {
		Push(&h, 1000, lessU)
		Push(&h, 999, lessU)
		Pop(&h, lessU)
		Pop(&h, lessU)
	}); n != 0 {
		t.Fatalf("%v allocations a push and pop", n)
	}
}
