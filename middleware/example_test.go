package middleware_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/middleware"
	"github.com/switchyard/switchyard/nodes"
)

// Metrics counts every run of the handlers it wraps, per node; Retry runs
// a failing handler again in place.
func ExampleMetrics() {
	m := middleware.NewMetrics()
	calls := 0
	flaky := nodes.HandlerFunc(func(context.Context, *nodes.Input) (*nodes.Outcome, error) {
		if calls++; calls < 3 {
			return nil, errors.New("busy")
		}
		return &nodes.Outcome{Status: nodes.StatusSuccess, Usage: nodes.Usage{InputTokens: 120, OutputTokens: 30}}, nil
	})
	// Retry is outermost (the first given), so Metrics inside it sees
	// every run: three, two of them failed.
	h := nodes.Chain(flaky, middleware.Retry(5, nil), m.Middleware())
	in := &nodes.Input{Node: &graph.Node{ID: "fetch", Attrs: graph.Attrs{}}}
	o, err := h.Handle(context.Background(), in)
	fmt.Println(o.Status, err, o.Notes)
	s := m.Node("fetch")
	fmt.Println(s.Runs, s.Failures, s.Usage.InputTokens)
	// Output:
	// success <nil> 3 runs (middleware retry)
	// 3 2 120
}
