package edges

import (
	"sync"
	"time"

	"github.com/switchyard/switchyard/clock"
)

// DebounceBuffer holds items until the edge has been quiet for the window,
// then makes the newest ready; older ones are dropped and counted.
type DebounceBuffer[T any] struct {
	window time.Duration
	clk    clock.Clock
	ready  func()

	mu      sync.Mutex
	held    T
	holding bool
	out     T
	outOK   bool
	timer   clock.Timer
	dropped uint64
	closed  bool
}

var _ Buffer[int] = (*DebounceBuffer[int])(nil)

// NewDebounce returns a debounce buffer; ready (may be nil) is called from
// the timer goroutine when an item becomes ready.
func NewDebounce[T any](window time.Duration, clk clock.Clock, ready func()) *DebounceBuffer[T] {
	return &DebounceBuffer[T]{window: window, clk: clk, ready: ready}
}

// Push holds v and restarts the quiet period.
func (d *DebounceBuffer[T]) Push(v T) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	if d.holding {
		d.dropped++
	}
	d.held, d.holding = v, true
	if d.timer == nil {
		d.timer = d.clk.AfterFunc(d.window, d.fire)
	} else {
		d.timer.Reset(d.window)
	}
}

// fire runs when the edge has been quiet for the window.
func (d *DebounceBuffer[T]) fire() {
	d.mu.Lock()
	if d.closed || !d.holding {
		d.mu.Unlock()
		return
	}
	if d.outOK {
		d.dropped++ // an older ready item not taken yet is superseded
	}
	d.out, d.outOK = d.held, true
	var zero T
	d.held, d.holding = zero, false
	ready := d.ready
	d.mu.Unlock()
	if ready != nil {
		ready()
	}
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

// Len is 1 when an item is ready.
func (d *DebounceBuffer[T]) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.outOK {
		return 1
	}
	return 0
}

// Dropped counts superseded items.
func (d *DebounceBuffer[T]) Dropped() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dropped
}

// Pending returns the ready item and the held one.
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

// Close stops the timer; held items stay (Pending) but never become ready.
func (d *DebounceBuffer[T]) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	if d.timer != nil {
		d.timer.Stop()
	}
}
