package nodes

import (
	"context"

	"github.com/switchyard/switchyard/graph"
)

// Start is the start node's handler: it does nothing.
type Start struct{}

var _ Handler = Start{}

// Handle succeeds.
func (Start) Handle(context.Context, *Input) (*Outcome, error) {
	return &Outcome{Status: StatusSuccess}, nil
}

// Inline reports true: Start never blocks.
func (Start) Inline(*graph.Node) bool { return true }

// Pure reports true: Start does nothing.
func (Start) Pure(*graph.Node) bool { return true }
