package edges

import (
	"fmt"
	"time"

	"github.com/switchyard/switchyard/clock"
)

// Mode is an edge's delivery mode (attribute delivery).
type Mode int

// Delivery modes.
const (
	// Queue delivers every envelope, in order; none is lost.
	Queue Mode = iota
	// Latest keeps only the newest undelivered envelope; older ones are
	// dropped and counted.
	Latest
	// Debounce holds envelopes until the edge has been quiet for its
	// window, then delivers the newest; older ones are dropped and counted.
	Debounce
)

func (m Mode) String() string { return [...]string{"queue", "latest", "debounce"}[m] }

// ParseMode reads the delivery attribute ("" is queue).
func ParseMode(s string) (Mode, error) {
	switch s {
	case "", "queue":
		return Queue, nil
	case "latest":
		return Latest, nil
	case "debounce":
		return Debounce, nil
	}
	return Queue, fmt.Errorf("edges: unknown delivery mode %q (queue, latest, debounce)", s)
}

// Buffer holds what arrived on one edge until the node takes it. Push and
// Pop are called by the owning actor; a debounce buffer's timer calls the
// ready callback from its own goroutine, so every Buffer is safe for
// concurrent use.
type Buffer[T any] interface {
	// Push accepts an arriving item.
	Push(v T)
	// Pop takes the next item that is ready for delivery.
	Pop() (T, bool)
	// Len is the number of items ready.
	Len() int
	// Dropped is how many items the mode discarded.
	Dropped() uint64
	// Pending returns every item held, ready or not, oldest first (for
	// checkpoints).
	Pending() []T
	// Close stops timers.
	Close()
}

// New makes the buffer of a mode. window is the debounce quiet period;
// ready is called (from the timer goroutine) when a debounced item becomes
// ready; clk drives the debounce timer.
func New[T any](mode Mode, window time.Duration, clk clock.Clock, ready func()) (Buffer[T], error) {
	switch mode {
	case Queue:
		return NewQueue[T](), nil
	case Latest:
		return NewLatest[T](), nil
	case Debounce:
		if window <= 0 {
			return nil, fmt.Errorf("edges: debounce needs a positive window, got %v", window)
		}
		if clk == nil {
			clk = clock.Real()
		}
		return NewDebounce[T](window, clk, ready), nil
	}
	return nil, fmt.Errorf("edges: unknown mode %d", mode)
}
