package edges

import (
	"sync"
	"time"

	"github.com/switchyard/switchyard/clock"
)

// DebounceBuffer holds items until the edge has been quiet for the window,
// then makes the newest ready and calls the ready callback; the items it
// superseded are dropped and counted. At most one item is ready and one
// held at a time: a held item that becomes ready while an older one is
// still unpopped replaces it (the older one is counted dropped).
type DebounceBuffer[T any] struct {
	window time.Duration
	clk    clock.Clock
	ready  func()

	mu      sync.Mutex
	idle    *sync.Cond // signalled when a ready callback returns
	held    T          // the newest item, waiting for quiet
	holding bool
	due     time.Time // when held becomes ready, if nothing else arrives
	out     T         // the ready item
	outOK   bool
	timer   clock.Timer
	firing  int // ready callbacks running
	dropped uint64
	closed  bool
}

var _ Buffer[int] = (*DebounceBuffer[int])(nil)

// NewDebounce returns a debounce buffer with a positive window. ready (may
// be nil) is called from the timer's goroutine each time an item becomes
// ready; it must not call Close.
func NewDebounce[T any](window time.Duration, clk clock.Clock, ready func()) *DebounceBuffer[T] {
	d := &DebounceBuffer[T]{window: window, clk: clk, ready: ready}
	d.idle = sync.NewCond(&d.mu)
	return d
}

// Push holds v, superseding a held item, and restarts the quiet period.
func (d *DebounceBuffer[T]) Push(v T) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		d.dropped++
		return
	}
	d.hold(v)
}

// hold makes v the held item and (re)arms the timer. d.mu is held.
func (d *DebounceBuffer[T]) hold(v T) {
	if d.holding {
		d.dropped++
	}
	d.held, d.holding = v, true
	d.due = d.clk.Now().Add(d.window)
	if d.timer == nil {
		d.timer = d.clk.AfterFunc(d.window, d.fire)
	} else {
		d.timer.Reset(d.window)
	}
}

// fire runs on the timer's goroutine. A timer that went off just before a
// Push reset it finds the quiet period not yet over and re-arms.
func (d *DebounceBuffer[T]) fire() {
	d.mu.Lock()
	if d.closed || !d.holding {
		d.mu.Unlock()
		return
	}
	if wait := d.due.Sub(d.clk.Now()); wait > 0 {
		d.timer.Reset(wait)
		d.mu.Unlock()
		return
	}
	if d.outOK {
		d.dropped++ // the older ready item was never taken
	}
	d.out, d.outOK = d.held, true
	var zero T
	d.held, d.holding = zero, false
	ready := d.ready
	if ready == nil {
		d.mu.Unlock()
		return
	}
	d.firing++
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.firing--
		d.idle.Broadcast()
		d.mu.Unlock()
	}()
	ready()
}

// Pop takes the ready item.
func (d *DebounceBuffer[T]) Pop() (T, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var zero T
	if !d.outOK {
		return zero, false
	}
	v := d.out
	d.out, d.outOK = zero, false
	return v, true
}

// Len is 1 when an item is ready, else 0.
func (d *DebounceBuffer[T]) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.outOK {
		return 1
	}
	return 0
}

// Dropped counts superseded and refused items.
func (d *DebounceBuffer[T]) Dropped() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dropped
}

// Pending returns the ready item, then the held one.
func (d *DebounceBuffer[T]) Pending() []T {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []T
	if d.outOK {
		out = append(out, d.out)
	}
	if d.holding {
		out = append(out, d.held)
	}
	return out
}

// Restore replaces what the buffer holds: the next-to-last of items becomes
// ready, the last is held for a fresh window, older ones are counted
// dropped.
func (d *DebounceBuffer[T]) Restore(items []T) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		d.dropped += uint64(len(items))
		return
	}
	var zero T
	if d.outOK {
		d.dropped++
	}
	if d.holding {
		d.dropped++
	}
	d.out, d.outOK, d.held, d.holding = zero, false, zero, false
	if d.timer != nil {
		d.timer.Stop()
	}
	if len(items) == 0 {
		return
	}
	if len(items) >= 2 {
		d.dropped += uint64(len(items) - 2)
		d.out, d.outOK = items[len(items)-2], true
	}
	d.hold(items[len(items)-1])
}

// Close stops the timer and waits for a running ready callback to return.
// A held item stays visible to Pending but never becomes ready.
func (d *DebounceBuffer[T]) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	if d.timer != nil {
		d.timer.Stop()
	}
	for d.firing > 0 {
		d.idle.Wait()
	}
}
