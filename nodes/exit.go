package nodes

import (
	"context"

	"github.com/switchyard/switchyard/graph"
)

// Exit is the exit node's handler: it does nothing; the runtime checks goal
// gates before the run ends.
type Exit struct{}

var _ Handler = Exit{}

// Handle succeeds.
func (Exit) Handle(context.Context, *Input) (*Outcome, error) {
	return &Outcome{Status: StatusSuccess}, nil
}

// Inline reports true: Exit never blocks.
func (Exit) Inline(*graph.Node) bool { return true }
