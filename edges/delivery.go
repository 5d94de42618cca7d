package edges

import (
	"fmt"
	"time"

	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/graph"
)

// Delivery reads an edge's delivery mode (attribute delivery) and, in
// debounce mode, its quiet window (attribute debounce: "2s", "500ms", or a
// plain number of seconds). It fails on an unknown mode, an unreadable
// window, or debounce mode without a positive window. The window is 0 in
// other modes.
func Delivery(e *graph.Edge) (Mode, time.Duration, error) {
	mode, err := ParseMode(e.Attrs.String("delivery"))
	if err != nil {
		return Queue, 0, err
	}
	if mode != Debounce {
		return mode, 0, nil
	}
	src := e.Attrs.String("debounce")
	if src == "" {
		return mode, 0, fmt.Errorf("edges: delivery=debounce needs a debounce window (e.g. debounce=2s)")
	}
	window, err := graph.ParseDuration(src)
	if err != nil {
		return mode, 0, fmt.Errorf("edges: debounce=%q: %w", src, err)
	}
	if window <= 0 {
		return mode, 0, fmt.Errorf("edges: debounce=%q: the window must be positive", src)
	}
	return mode, window, nil
}

// NewFor makes the buffer an edge's attributes ask for (see Delivery and
// New).
func NewFor[T any](e *graph.Edge, clk clock.Clock, ready func()) (Buffer[T], error) {
	mode, window, err := Delivery(e)
	if err != nil {
		return nil, err
	}
	return New[T](mode, window, clk, ready)
}
