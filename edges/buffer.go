package edges

import (
	"fmt"
	"strconv"
	"time"

	"github.com/switchyard/switchyard/clock"
)

// Mode is an edge's delivery mode (the edge attribute delivery).
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

// String is the attribute spelling of the mode.
func (m Mode) String() string {
	switch m {
	case Queue:
		return "queue"
	case Latest:
		return "latest"
	case Debounce:
		return "debounce"
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

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
	return Queue, fmt.Errorf("edges: unknown delivery mode %q (want queue, latest or debounce)", s)
}

// Buffer holds what arrived on one edge until the node takes it.
//
// Push, Pop and Restore are normally called by the owning actor, but every
// Buffer is safe for concurrent use: a debounce buffer's timer works on
// another goroutine. An item is ready as soon as Push returns in queue and
// latest modes; a debounce buffer calls its ready callback when an item
// becomes ready later. A buffer never loses an item silently: what the mode
// discards is counted by Dropped.
type Buffer[T any] interface {
	// Push accepts an arriving item. After Close it is refused and counted
	// as dropped.
	Push(v T)
	// Pop takes the next ready item; false when none is ready.
	Pop() (T, bool)
	// Len is the number of items ready to Pop.
	Len() int
	// Dropped is how many items the buffer discarded since it was made.
	Dropped() uint64
	// Pending returns every item held, ready or not, oldest first, without
	// taking them (for checkpoints).
	Pending() []T
	// Restore replaces what the buffer holds with items saved from Pending
	// (what it held before is counted as dropped). Queue keeps them all,
	// latest the last; debounce makes the next-to-last ready and holds the
	// last for a fresh window. Restore does not call the ready callback:
	// check Len afterwards. After Close the items are refused and counted.
	Restore(items []T)
	// Close stops timers and refuses further items. Items already held stay
	// visible to Pending, and ready ones can still be popped. When Close
	// returns, no ready callback is running or will run; so ready must not
	// call Close.
	Close()
}

// New makes the buffer of a mode. window is the debounce quiet period (it
// must be positive in Debounce mode and is ignored otherwise); clk drives
// the debounce timer (nil is the real clock); ready, which may be nil, is
// called from the timer's goroutine when a debounced item becomes ready.
func New[T any](mode Mode, window time.Duration, clk clock.Clock, ready func()) (Buffer[T], error) {
	switch mode {
	case Queue:
		return NewQueue[T](), nil
	case Latest:
		return NewLatest[T](), nil
	case Debounce:
		if window <= 0 {
			return nil, fmt.Errorf("edges: delivery=debounce needs a positive debounce window, got %v", window)
		}
		if clk == nil {
			clk = clock.Real()
		}
		return NewDebounce[T](window, clk, ready), nil
	}
	return nil, fmt.Errorf("edges: unknown delivery mode %v", mode)
}
