// Package edgetest is the conformance suite of delivery buffers: the
// behaviour every mode shares, and each mode's own.
package edgetest

import (
	"testing"

	"github.com/switchyard/switchyard/edges"
)

// Features says what a buffer under test promises.
type Features struct {
	// KeepsAll: every pushed item is delivered, in order (queue).
	KeepsAll bool
	// Immediate: a pushed item is ready at once (queue, latest), without
	// waiting for a quiet period.
	Immediate bool
	// Settle makes held items ready (advances a fake clock for debounce).
	Settle func()
}

// Run runs the suite against buffers made by ctor.
func Run(t *testing.T, f Features, ctor func() edges.Buffer[int]) {
	settle := func() {
		if f.Settle != nil {
			f.Settle()
		}
	}
	t.Run("empty", func(t *testing.T) {
		b := ctor()
		defer b.Close()
		if _, ok := b.Pop(); ok {
			t.Fatal("Pop on an empty buffer returned an item")
		}
		if b.Len() != 0 || b.Dropped() != 0 || len(b.Pending()) != 0 {
			t.Fatal("an empty buffer reports content")
		}
	})
	t.Run("one item", func(t *testing.T) {
		b := ctor()
		defer b.Close()
		b.Push(7)
		if f.Immediate && b.Len() != 1 {
			t.Fatalf("Len = %d after one push, want 1", b.Len())
		}
		settle()
		v, ok := b.Pop()
		if !ok || v != 7 {
			t.Fatalf("Pop = %v, %v; want 7, true", v, ok)
		}
		if _, ok := b.Pop(); ok {
			t.Fatal("an item was delivered twice")
		}
	})
	t.Run("many items", func(t *testing.T) {
		b := ctor()
		defer b.Close()
		for i := 1; i <= 100; i++ {
			b.Push(i)
		}
		if got := len(b.Pending()); f.KeepsAll && got != 100 {
			t.Fatalf("Pending holds %d, want 100", got)
		}
		settle()
		var got []int
		for {
			v, ok := b.Pop()
			if !ok {
				break
			}
			got = append(got, v)
		}
		if f.KeepsAll {
			if len(got) != 100 || b.Dropped() != 0 {
				t.Fatalf("delivered %d, dropped %d; want 100, 0", len(got), b.Dropped())
			}
			for i, v := range got {
				if v != i+1 {
					t.Fatalf("out of order at %d: %d", i, v)
				}
			}
			return
		}
		if len(got) != 1 || got[0] != 100 {
			t.Fatalf("delivered %v, want only the newest [100]", got)
		}
		if b.Dropped() != 99 {
			t.Fatalf("dropped %d, want 99 counted", b.Dropped())
		}
	})
	t.Run("push after pop", func(t *testing.T) {
		b := ctor()
		defer b.Close()
		b.Push(1)
		settle()
		b.Pop()
		b.Push(2)
		settle()
		if v, ok := b.Pop(); !ok || v != 2 {
			t.Fatalf("Pop = %v, %v; want 2", v, ok)
		}
	})
}
