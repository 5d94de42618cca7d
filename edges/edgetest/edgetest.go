// Package edgetest is the conformance suite of delivery buffers
// (edges.Buffer): the behaviour every mode shares — nothing delivered
// twice, nothing lost without being counted, checkpoints through Pending and
// Restore, Close, concurrent use — and each mode's own behaviour, chosen by
// Features.Mode.
//
// A test of a buffer implementation calls Run with a constructor:
//
//	clk := clock.NewFake(time.Unix(0, 0))
//	edgetest.Run(t, edgetest.Features{Mode: edges.Debounce, Window: time.Second, Clock: clk},
//		func(ready func()) edges.Buffer[int] { return edges.NewDebounce[int](time.Second, clk, ready) })
package edgetest

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/edges"
)

// Features says what a buffer under test promises.
type Features struct {
	// Mode is the delivery mode the buffer implements: it chooses the
	// mode's own tests.
	Mode edges.Mode
	// Window is the quiet period of a debounce buffer.
	Window time.Duration
	// Clock is the fake clock a debounce buffer was built with; the suite
	// advances it. Required for Debounce.
	Clock *clock.Fake
}

// Constructor makes a new, empty buffer that calls ready (never nil) when
// an item becomes ready later than its Push.
type Constructor func(ready func()) edges.Buffer[int]

// Run runs the suite against buffers made by ctor.
func Run(t *testing.T, f Features, ctor Constructor) {
	t.Helper()
	if f.Mode == edges.Debounce {
		require.NotNil(t, f.Clock, "edgetest: a debounce buffer needs Features.Clock")
		require.Positive(t, f.Window, "edgetest: a debounce buffer needs Features.Window")
	}
	s := suite{f: f, ctor: ctor}
	t.Run("common", func(t *testing.T) {
		t.Run("empty", s.empty)
		t.Run("one item once", s.oneItemOnce)
		t.Run("push after pop", s.pushAfterPop)
		t.Run("nothing lost uncounted", s.conservation)
		t.Run("pending does not take", s.pendingDoesNotTake)
		t.Run("restore from pending", s.restoreFromPending)
		t.Run("restore replaces", s.restoreReplaces)
		t.Run("close refuses", s.closeRefuses)
		t.Run("concurrent use", s.concurrent)
	})
	switch f.Mode {
	case edges.Queue:
		t.Run("queue", func(t *testing.T) {
			t.Run("keeps all in order", s.queueKeepsAll)
			t.Run("interleaved past capacity", s.queueInterleaved)
		})
	case edges.Latest:
		t.Run("latest", func(t *testing.T) {
			t.Run("keeps the newest", s.latestKeepsNewest)
			t.Run("ready at once", s.latestReadyAtOnce)
		})
	case edges.Debounce:
		t.Run("debounce", func(t *testing.T) {
			t.Run("waits for quiet", s.debounceWaitsForQuiet)
			t.Run("ready callback", s.debounceReadyCallback)
			t.Run("unpopped item superseded", s.debounceSupersedes)
			t.Run("close stops the timer", s.debounceCloseStops)
			t.Run("restore re-arms", s.debounceRestore)
		})
	}
}

type suite struct {
	f    Features
	ctor Constructor
}

// make builds a buffer that counts its ready callbacks, closed at cleanup.
func (s suite) make(t *testing.T) (edges.Buffer[int], *atomic.Int64) {
	var ready atomic.Int64
	b := s.ctor(func() { ready.Add(1) })
	require.NotNil(t, b)
	t.Cleanup(b.Close)
	return b, &ready
}

// settle lets held items become ready: for debounce, a quiet window passes.
func (s suite) settle() {
	if s.f.Mode == edges.Debounce {
		s.f.Clock.Advance(s.f.Window)
	}
}

// drain pops every ready item.
func drain(b edges.Buffer[int]) []int {
	var got []int
	for {
		v, ok := b.Pop()
		if !ok {
			return got
		}
		got = append(got, v)
	}
}

func (s suite) empty(t *testing.T) {
	b, _ := s.make(t)
	_, ok := b.Pop()
	require.False(t, ok, "Pop on an empty buffer")
	require.Zero(t, b.Len())
	require.Zero(t, b.Dropped())
	require.Empty(t, b.Pending())
	s.settle()
	_, ok = b.Pop()
	require.False(t, ok, "an empty buffer makes nothing ready")
}

func (s suite) oneItemOnce(t *testing.T) {
	b, _ := s.make(t)
	b.Push(7)
	s.settle()
	require.Equal(t, 1, b.Len())
	v, ok := b.Pop()
	require.True(t, ok)
	require.Equal(t, 7, v)
	require.Zero(t, b.Len())
	s.settle()
	_, ok = b.Pop()
	require.False(t, ok, "an item was delivered twice")
	require.Zero(t, b.Dropped())
}

func (s suite) pushAfterPop(t *testing.T) {
	b, _ := s.make(t)
	for i := 1; i <= 3; i++ {
		b.Push(i)
		s.settle()
		v, ok := b.Pop()
		require.True(t, ok, "round %d", i)
		require.Equal(t, i, v)
	}
	require.Zero(t, b.Dropped(), "nothing is dropped when every item is taken in time")
}

// conservation: every pushed item is delivered, still held, or counted.
func (s suite) conservation(t *testing.T) {
	b, _ := s.make(t)
	pushed, delivered := 0, 0
	for round := 0; round < 20; round++ {
		for i := 0; i < round%5; i++ {
			b.Push(pushed)
			pushed++
		}
		if round%3 == 0 {
			s.settle()
		}
		if round%2 == 0 {
			delivered += len(drain(b))
		}
		require.EqualValues(t, pushed, uint64(delivered)+b.Dropped()+uint64(len(b.Pending())), "round %d", round)
	}
}

func (s suite) pendingDoesNotTake(t *testing.T) {
	b, _ := s.make(t)
	b.Push(1)
	b.Push(2)
	first := b.Pending()
	require.NotEmpty(t, first)
	require.Equal(t, 2, first[len(first)-1], "the newest item is held")
	require.Equal(t, first, b.Pending(), "Pending is repeatable")
	first[0] = 99 // the caller owns the slice
	require.NotEqual(t, 99, b.Pending()[0])
	s.settle()
	got := drain(b)
	require.NotEmpty(t, got)
	require.Equal(t, 2, got[len(got)-1])
}

// restoreFromPending: a buffer re-seeded from a checkpoint of another one
// delivers what the other would have.
func (s suite) restoreFromPending(t *testing.T) {
	orig, _ := s.make(t)
	for i := 1; i <= 5; i++ {
		orig.Push(i)
	}
	saved := orig.Pending()
	copyB, _ := s.make(t)
	copyB.Restore(saved)
	require.Equal(t, saved, copyB.Pending(), "Pending after Restore is what was saved")
	s.settle()
	require.Equal(t, drain(orig), drain(copyB))
	require.Empty(t, copyB.Pending())
}

func (s suite) restoreReplaces(t *testing.T) {
	b, _ := s.make(t)
	b.Push(1)
	before := b.Dropped()
	b.Restore([]int{10})
	require.Equal(t, []int{10}, b.Pending())
	require.Equal(t, before+1, b.Dropped(), "what Restore replaced is counted")
	s.settle()
	require.Equal(t, []int{10}, drain(b))
	b.Restore(nil)
	require.Empty(t, b.Pending())
}

func (s suite) closeRefuses(t *testing.T) {
	b, _ := s.make(t)
	b.Push(1)
	s.settle()
	b.Push(2)
	b.Close()
	b.Close() // idempotent
	held := len(b.Pending())
	b.Push(3)
	b.Restore([]int{4, 5})
	require.Len(t, b.Pending(), held, "a closed buffer takes nothing in")
	got := drain(b)
	require.NotEmpty(t, got, "ready items can still be popped after Close")
	require.EqualValues(t, 5, uint64(len(got))+b.Dropped()+uint64(len(b.Pending())), "refused items are counted")
}

// concurrent: producers, a consumer and (for debounce) the clock run at
// once; under -race nothing races, nothing is delivered twice, and every
// item is accounted for.
func (s suite) concurrent(t *testing.T) {
	b, _ := s.make(t)
	const producers, each = 4, 250
	var wg sync.WaitGroup
	stop := make(chan struct{})
	delivered := make(chan []int, 1)
	go func() {
		var got []int
		for {
			select {
			case <-stop:
				delivered <- append(got, drain(b)...)
				return
			default:
				if v, ok := b.Pop(); ok {
					got = append(got, v)
				}
				b.Len()
				b.Pending()
			}
		}
	}()
	if s.f.Mode == edges.Debounce {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				s.f.Clock.Advance(s.f.Window / 2)
			}
		}()
	}
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				b.Push(p*each + i)
			}
		}()
	}
	wg.Wait()
	s.settle()
	close(stop)
	var got []int
	select {
	case got = <-delivered:
	case <-time.After(10 * time.Second):
		t.Fatal("the consumer did not stop")
	}
	seen := map[int]bool{}
	last := map[int]int{}
	for _, v := range got {
		require.False(t, seen[v], "%d delivered twice", v)
		seen[v] = true
		if s.f.Mode == edges.Queue {
			p := v / each
			if prev, ok := last[p]; ok {
				require.Greater(t, v, prev, "producer %d's items out of order", p)
			}
			last[p] = v
		}
	}
	require.EqualValues(t, producers*each, uint64(len(got))+b.Dropped()+uint64(len(b.Pending())))
	if s.f.Mode == edges.Queue {
		require.Len(t, got, producers*each, "a queue loses nothing")
	}
}

func (s suite) queueKeepsAll(t *testing.T) {
	b, _ := s.make(t)
	const n = 1000
	for i := 0; i < n; i++ {
		b.Push(i)
	}
	require.Equal(t, n, b.Len())
	require.Len(t, b.Pending(), n)
	got := drain(b)
	require.Len(t, got, n)
	for i, v := range got {
		require.Equal(t, i, v, "out of order")
	}
	require.Zero(t, b.Dropped())
}

// queueInterleaved pushes more than it pops so the ring wraps and grows
// with items on both sides of its end.
func (s suite) queueInterleaved(t *testing.T) {
	b, _ := s.make(t)
	next, want := 0, 0
	for round := 0; round < 200; round++ {
		for i := 0; i < 3; i++ {
			b.Push(next)
			next++
		}
		for i := 0; i < 2; i++ {
			v, ok := b.Pop()
			require.True(t, ok)
			require.Equal(t, want, v)
			want++
		}
		pending := b.Pending()
		require.Len(t, pending, next-want)
		if len(pending) > 0 {
			require.Equal(t, want, pending[0])
			require.Equal(t, next-1, pending[len(pending)-1])
		}
	}
	for _, v := range drain(b) {
		require.Equal(t, want, v)
		want++
	}
	require.Equal(t, next, want)
}

func (s suite) latestKeepsNewest(t *testing.T) {
	b, _ := s.make(t)
	for i := 1; i <= 100; i++ {
		b.Push(i)
		require.Equal(t, 1, b.Len())
	}
	require.Equal(t, []int{100}, b.Pending())
	require.Equal(t, []int{100}, drain(b))
	require.EqualValues(t, 99, b.Dropped())
}

func (s suite) latestReadyAtOnce(t *testing.T) {
	b, ready := s.make(t)
	b.Push(1)
	v, ok := b.Pop()
	require.True(t, ok, "no waiting in latest mode")
	require.Equal(t, 1, v)
	require.Zero(t, ready.Load(), "the pusher knows: no callback")
}

func (s suite) debounceWaitsForQuiet(t *testing.T) {
	b, ready := s.make(t)
	w, clk := s.f.Window, s.f.Clock
	b.Push(1)
	clk.Advance(w - 1)
	require.Zero(t, b.Len(), "not ready before the window has passed")
	b.Push(2) // not quiet: the window starts again
	clk.Advance(w - 1)
	require.Zero(t, b.Len(), "a push restarts the window")
	require.Zero(t, ready.Load())
	clk.Advance(1)
	require.Equal(t, 1, b.Len(), "ready once quiet for the window")
	require.EqualValues(t, 1, ready.Load())
	require.Equal(t, []int{2}, drain(b), "the newest is delivered")
	require.EqualValues(t, 1, b.Dropped(), "the older is counted")
	clk.Advance(10 * w)
	require.EqualValues(t, 1, ready.Load(), "nothing more to make ready")
}

func (s suite) debounceReadyCallback(t *testing.T) {
	b, ready := s.make(t)
	for i := 1; i <= 3; i++ {
		b.Push(i)
		s.settle()
		require.EqualValues(t, i, ready.Load(), "one callback per item made ready")
		v, ok := b.Pop()
		require.True(t, ok)
		require.Equal(t, i, v)
	}
}

func (s suite) debounceSupersedes(t *testing.T) {
	b, _ := s.make(t)
	b.Push(1)
	s.settle()
	b.Push(2)
	require.Equal(t, []int{1, 2}, b.Pending(), "ready, then held")
	require.Equal(t, 1, b.Len())
	s.settle()
	require.Equal(t, []int{2}, drain(b), "a newer ready item replaces one never taken")
	require.EqualValues(t, 1, b.Dropped())
}

func (s suite) debounceCloseStops(t *testing.T) {
	b, ready := s.make(t)
	b.Push(1)
	b.Close()
	s.settle()
	s.f.Clock.Advance(10 * s.f.Window)
	require.Zero(t, ready.Load(), "no callback after Close")
	require.Zero(t, b.Len(), "a held item never becomes ready after Close")
	require.Equal(t, []int{1}, b.Pending(), "but it is still reported")
}

func (s suite) debounceRestore(t *testing.T) {
	b, ready := s.make(t)
	b.Restore([]int{1, 2, 3})
	require.Equal(t, []int{2, 3}, b.Pending(), "the next-to-last ready, the last held")
	require.EqualValues(t, 1, b.Dropped())
	require.Equal(t, 1, b.Len())
	require.Zero(t, ready.Load(), "Restore does not call back")
	v, ok := b.Pop()
	require.True(t, ok)
	require.Equal(t, 2, v)
	s.f.Clock.Advance(s.f.Window - 1)
	require.Zero(t, b.Len(), "the held item waits a fresh window")
	s.f.Clock.Advance(1)
	require.EqualValues(t, 1, ready.Load())
	require.Equal(t, []int{3}, drain(b))
}
