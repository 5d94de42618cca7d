package nodes

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/edges/cond"
)

// ChildRunner starts child pipelines for stack.manager_loop nodes; the
// session implements it with a sub-session.
type ChildRunner interface {
	Start(ctx context.Context, dotfile, workdir string) (Child, error)
}

// ChildStatus is what a manager observes of its child.
// ChildFailedPathKey is the context key where a manager node that failed
// because its child failed puts the child's failed node (or path).
const ChildFailedPathKey = "stack.child.failed_node"

// ChildFailedCauseKey is the context key where a manager node that failed
// because its child failed puts the cause code of the child's failure
// (session.completed's cause: budget_exceeded, max_iterations, stalled,
// timeout), so the parent's run error wraps the same cause.
const ChildFailedCauseKey = "stack.child.cause"

type ChildStatus struct {
	State       string // running, completed, failed
	Outcome     string // the child's final status when done
	CurrentNode string
	Completed   int // nodes completed so far
	// FailedNode is, when the child failed, the node whose failure ended it
	// (a path "a/b" when that node was a manager itself); "" otherwise.
	FailedNode string
	// Reason is the child's failure reason.
	Reason string
	// Cause is the cause code of the child's failure ("" when none).
	Cause string
}

// Child is a running child pipeline.
type Child interface {
	Status() ChildStatus
	// Steer sends a message to the child's current node.
	Steer(ctx context.Context, msg string) error
	// Done is closed when the child ends.
	Done() <-chan struct{}
	Stop()
}

// Manager is the stack.manager_loop handler (spec 4.11): it starts the
// child pipeline named by stack.child_dotfile (node, else graph attribute)
// and supervises it in cycles of observe, steer and wait until the child
// ends, manager.stop_condition holds, or manager.max_cycles is exceeded.
type Manager struct {
	Children ChildRunner
	Clock    clock.Clock
}

var _ Handler = (*Manager)(nil)

// Handle runs the supervision loop.
func (h *Manager) Handle(ctx context.Context, in *Input) (*Outcome, error) {
	attr := func(k string) string {
		if v := in.Node.Attrs.String(k); v != "" {
			return v
		}
		return in.Graph.Attrs.String(k)
	}
	if h.Children == nil {
		return &Outcome{Status: StatusFail, FailureReason: "no child runner configured for stack.manager_loop"}, nil
	}
	dot := attr("stack.child_dotfile")
	if dot == "" {
		return &Outcome{Status: StatusFail, FailureReason: "stack.manager_loop needs stack.child_dotfile"}, nil
	}
	workdir := attr("stack.child_workdir")
	if workdir == "" {
		workdir = in.WorkDir
	}
	dot = filepath.Clean(dot)
	poll := 45 * time.Second
	if d, ok := in.Node.Attrs.Duration("manager.poll_interval"); ok && d > 0 {
		poll = d
	}
	maxCycles := 1000
	if n, ok := in.Node.Attrs.Int("manager.max_cycles"); ok && n > 0 {
		maxCycles = n
	}
	var stop *cond.Expr
	if src := in.Node.Attrs.String("manager.stop_condition"); src != "" {
		var err error
		if stop, err = cond.Parse(src); err != nil {
			return &Outcome{Status: StatusFail, FailureReason: "manager.stop_condition: " + err.Error()}, nil
		}
	}
	actions := in.Node.Attrs.String("manager.actions")
	if actions == "" {
		actions = "observe,wait"
	}
	steer := strings.Contains(actions, "steer")
	if in.Node.Attrs.String("stack.child_autostart") == "false" {
		return &Outcome{Status: StatusFail, FailureReason: "stack.child_autostart=false: attaching to a child started elsewhere is not supported"}, nil
	}
	child, err := h.Children.Start(ctx, dot, workdir)
	if err != nil {
		return &Outcome{Status: StatusFail, FailureReason: "start child pipeline: " + err.Error()}, nil
	}
	defer child.Stop()
	clk := h.Clock
	if clk == nil {
		clk = clock.Real()
	}
	updates := map[string]string{}
	observe := func() ChildStatus {
		st := child.Status()
		updates["stack.child.status"] = st.State
		updates["stack.child.outcome"] = st.Outcome
		updates["stack.child.current_node"] = st.CurrentNode
		updates["stack.child.completed"] = strconv.Itoa(st.Completed)
		return st
	}
	for cycle := 1; cycle <= maxCycles; cycle++ {
		st := observe()
		updates["stack.manager.cycles"] = strconv.Itoa(cycle)
		if st.State != "running" {
			return childOutcome(st, updates), nil
		}
		if stop != nil && stop.Eval(cond.Env{Outcome: st.Outcome, Context: stopContext(in.Context, updates)}) {
			return &Outcome{Status: StatusSuccess, ContextUpdates: updates, Notes: "stop condition held"}, nil
		}
		if steer {
			msg := in.Node.Attrs.String("manager.steer_prompt")
			if msg == "" {
				msg = in.Prompt
			}
			if msg != "" {
				if err := child.Steer(ctx, msg); err != nil {
					updates["stack.manager.steer_error"] = err.Error()
				}
			}
		}
		t := clk.NewTimer(poll)
		select {
		case <-t.C():
		case <-child.Done():
			t.Stop()
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	st := observe()
	if st.State != "running" {
		return childOutcome(st, updates), nil
	}
	return &Outcome{Status: StatusFail, ContextUpdates: updates,
		FailureReason: fmt.Sprintf("the child pipeline was still running after %d cycles (manager.max_cycles)", maxCycles)}, nil
}

// stopContext is what the stop condition reads: the run context with the
// latest observation over it.
func stopContext(run, updates map[string]string) map[string]string {
	ctx := make(map[string]string, len(run)+len(updates))
	for k, v := range run {
		ctx[k] = v
	}
	for k, v := range updates {
		ctx[k] = v
	}
	return ctx
}

func childOutcome(st ChildStatus, updates map[string]string) *Outcome {
	if st.State == "completed" && Status(st.Outcome).IsSuccess() {
		return &Outcome{Status: StatusSuccess, ContextUpdates: updates}
	}
	reason := "the child pipeline ended " + st.State + " (" + st.Outcome + ")"
	if st.FailedNode != "" {
		// The path of the failure goes up (switchyard.RunError.Path).
		updates[ChildFailedPathKey] = st.FailedNode
		reason += " at node " + st.FailedNode
	}
	if st.Cause != "" {
		updates[ChildFailedCauseKey] = st.Cause
	}
	if st.Reason != "" {
		reason += ": " + st.Reason
	}
	return &Outcome{Status: StatusFail, ContextUpdates: updates, FailureReason: reason}
}
