package nodes

import (
	"context"
	"fmt"
	"github.com/switchyard/switchyard/graph"
	"strings"
)

// Parallel is the parallel node's handler. The fan-out itself is the
// runtime's: a parallel node broadcasts to every outgoing edge whose
// condition holds, each branch carrying its own copy of the context, and
// the branches meet at the fan-in node (the `join` attribute, else the
// nearest fan-in that every branch reaches).
type Parallel struct{}

var _ Handler = Parallel{}

// Handle validates the node's settings (join_policy must be wait_all,
// max_parallel a whole number of at least 1) and succeeds, noting the
// branches.
func (Parallel) Handle(_ context.Context, in *Input) (*Outcome, error) {
	out := in.Graph.Outgoing(in.Node.ID)
	if len(out) == 0 {
		return &Outcome{Status: StatusFail, FailureReason: "parallel node " + in.Node.ID + " has no branches"}, nil
	}
	if p := in.Node.Attrs.String("join_policy"); p != "" && p != "wait_all" {
		return &Outcome{Status: StatusFail, FailureReason: "join_policy " + p + " is not supported: branches always join with wait_all"}, nil
	}
	if in.Node.Attrs.Has("max_parallel") {
		if n, ok := in.Node.Attrs.Int("max_parallel"); !ok || n < 1 {
			return &Outcome{Status: StatusFail, FailureReason: fmt.Sprintf("max_parallel must be a whole number of at least 1, not %q", in.Node.Attrs.String("max_parallel"))}, nil
		}
	}
	var names []string
	for _, e := range out {
		names = append(names, e.To)
	}
	return &Outcome{Status: StatusSuccess, Notes: fmt.Sprintf("%d branches: %s", len(out), strings.Join(names, ", "))}, nil
}

// Inline reports true: Parallel never blocks.
func (Parallel) Inline(*graph.Node) bool { return true }

// Pure reports true: Parallel only names its branches.
func (Parallel) Pure(*graph.Node) bool { return true }
