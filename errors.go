package switchyard

import (
	"errors"
	"strings"

	"github.com/switchyard/switchyard/nodes"
)

// ErrNodeFailed is the cause of a run that failed because a node failed
// (its handler's error, a fail outcome with no edge for it, an unsatisfied
// goal gate): the cause when no more specific one applies.
var ErrNodeFailed = errors.New("switchyard: node failed")

// RunError is the error Run and Execution.Wait return for a run that
// failed, as Report.Status fail says. It names the node whose failure
// ended the run and wraps the cause, so a caller can inspect it:
//
//	var re *switchyard.RunError
//	if errors.As(err, &re) { log.Print(re.Node(), re.Reason) }
//	if errors.Is(err, scheduler.ErrBudgetExceeded) { ... }
//
// Causes: scheduler.ErrBudgetExceeded (a budget ran out, budget_time
// included), scheduler.ErrMaxIterations, scheduler.ErrStalled,
// context.DeadlineExceeded (a node's timeout), else ErrNodeFailed.
type RunError struct {
	SessionID string
	// Path is the node where the run failed, from the session's graph
	// down: a stack.manager_loop node that failed because its child
	// pipeline did is followed by the child's node ("manage", "build").
	// Empty when no node's failure ended it (a stall, a fatal runtime
	// error).
	Path   []string
	Reason string
	Err    error // the cause, never nil
}

// Node is the last element of Path ("" when empty).
func (e *RunError) Node() string {
	if len(e.Path) == 0 {
		return ""
	}
	return e.Path[len(e.Path)-1]
}

func (e *RunError) Error() string {
	var b strings.Builder
	b.WriteString("switchyard: session ")
	b.WriteString(e.SessionID)
	b.WriteString(" failed")
	if len(e.Path) > 0 {
		b.WriteString(" at node ")
		b.WriteString(strings.Join(e.Path, "/"))
	}
	if e.Reason != "" {
		b.WriteString(": ")
		b.WriteString(e.Reason)
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *RunError) Unwrap() error { return e.Err }

// runError is the error of a finished report: a *RunError when it failed.
func runError(rep *Report, node string, cause error) error {
	if rep == nil || rep.Status != RunFail {
		return nil
	}
	if cause == nil {
		cause = ErrNodeFailed
	}
	re := &RunError{SessionID: rep.SessionID, Reason: rep.Reason, Err: cause}
	if node != "" {
		re.Path = strings.Split(node, "/")
	}
	return re
}

// RunStatus is a run's status in a Report. It is a string, so
// rep.Status == "success" keeps working.
type RunStatus = string

// Run statuses.
const (
	RunSuccess RunStatus = "success"
	RunFail    RunStatus = "fail"
	// RunRunning: the session was stopped before it ended (it can be
	// resumed).
	RunRunning RunStatus = "running"
)

// NodeStatus is a node's status in a report: the same vocabulary as the
// handlers' outcomes (nodes.Status) and the events' status field, plus
// skipped for a node that never ran. Custom statuses an agent reported
// are kept verbatim.
type NodeStatus = nodes.Status

// Node statuses.
const (
	NodeSuccess NodeStatus = nodes.StatusSuccess
	NodePartial NodeStatus = nodes.StatusPartial
	NodeFailed  NodeStatus = nodes.StatusFail
	NodeRetry   NodeStatus = nodes.StatusRetry
	NodeSkipped NodeStatus = nodes.StatusSkipped
)
