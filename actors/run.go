package actors

import (
	"context"
	"errors"
	"fmt"
	"github.com/switchyard/switchyard/clock"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/switchyard/switchyard/edges"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/internal/crash"
	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/nodes/agent"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// retrySettings is what a node's attributes (and its graph's) say of
// retries, read once per node and graph (retrySettingsCache).
type retrySettings struct {
	g           *graph.Graph
	n           *graph.Node
	maxRetries  int
	retryOnFail bool
}

// retrySettingsCache holds a node's retrySettings for the graph and node
// they were read from: a live edit installs a new graph (and nodes), so a
// firing of the edited node reads them again. Atomic: an inline handler
// runs on the actor's goroutine, the others on its runner's.
type retrySettingsCache struct{ p atomic.Pointer[retrySettings] }

// retrySettings returns the retry settings of n in g, looked up in the
// attributes only on the node's first firing (and after a live edit).
func (a *nodeActor) retrySettings(g *graph.Graph, n *graph.Node) *retrySettings {
	if rs := a.retry.p.Load(); rs != nil && rs.g == g && rs.n == n {
		return rs
	}
	_, maxRetries := policyOf(g, n)
	rs := &retrySettings{g: g, n: n, maxRetries: maxRetries, retryOnFail: n.Attrs.Bool("retry_on_fail")}
	a.retry.p.Store(rs)
	return rs
}

// runResult is what a handler run (with its retries) produced.
type runResult struct {
	outcome  *nodes.Outcome
	attempts int
	dur      time.Duration
	cause    error // why it failed, for errors.Is (Terminal.Cause); nil when unknown
}

// run executes the handler on a System goroutine, retrying as the node's
// policy says (spec 3.5, DESIGN decision 2). It never panics.
func (a *nodeActor) run(ctx context.Context, j *job) *runResult {
	rs := a.retrySettings(j.in.Graph, j.node)
	maxRetries, retryOnFail := rs.maxRetries, rs.retryOnFail
	backoff := a.s.cfg.Backoff // nil: the node's policy's, made at its first retry
	start := a.s.clk.Now()
	if err := a.fetchArtifacts(ctx, j); err != nil {
		return &runResult{outcome: &nodes.Outcome{Status: nodes.StatusFail, FailureReason: "input artifacts: " + err.Error()},
			attempts: 1, dur: a.s.clk.Now().Sub(start)}
	}
	res := a.attempts(ctx, j, maxRetries, backoff, retryOnFail, start)
	if ctx.Err() == nil && res.outcome.Status == nodes.StatusFail {
		applyFailurePolicy(j.node.Attrs.String("on_failure"), res.outcome)
	}
	if ctx.Err() == nil {
		arts, err := a.storeArtifacts(ctx, j, res.outcome)
		if err != nil {
			reason := "output artifacts: " + err.Error()
			if cause := budgetCause(ctx); cause != nil {
				reason = cause.Error() // the budget ran out while they were stored
			}
			res.outcome = &nodes.Outcome{Status: nodes.StatusFail, FailureReason: reason, Usage: res.outcome.Usage}
		}
		j.artifacts = arts
	}
	if cause := budgetCause(ctx); cause != nil {
		res.cause = cause
	} else if res.outcome.Status == nodes.StatusFail && strings.HasPrefix(res.outcome.FailureReason, "timeout: ") {
		res.cause = context.DeadlineExceeded
	}
	if cause := budgetCause(ctx); cause != nil && res.outcome.Status != nodes.StatusFail {
		// A budget ran out during the run: the firing fails with it, even
		// when the handler finished without looking at its context.
		res.outcome = &nodes.Outcome{Status: nodes.StatusFail, FailureReason: cause.Error(), Usage: res.outcome.Usage,
			Response: res.outcome.Response}
		j.artifacts = nil
	}
	return res
}

// result is the firing's result, in the job's own room for it.
func (j *job) result(o *nodes.Outcome, attempts int, d time.Duration) *runResult {
	j.res = runResult{outcome: o, attempts: attempts, dur: d}
	return &j.res
}

// emitter is the Input.Emit of a node's handler runs: made once per node
// (a closure per attempt was one allocation per firing).
func (a *nodeActor) emitter() func(kind string, fields map[string]any) {
	s, node := a.s, a.node.ID
	return func(kind string, fields map[string]any) {
		ev := &pb.Event{Kind: kind, Node: node}
		keys := make([]string, 0, len(fields))
		for k := range fields {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if k == "message" {
				ev.Message = fmt.Sprint(fields[k])
				continue
			}
			ev.Attrs = append(ev.Attrs, &pb.KV{Key: k, Value: fmt.Sprint(fields[k])})
		}
		s.Emit(ev)
	}
}

// budgetCause is the budget that cancelled the firing's context, or nil.
func budgetCause(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	if cause := context.Cause(ctx); errors.Is(cause, errBudgetCancel) || errors.Is(cause, errTimeBudget) {
		return cause
	}
	return nil
}

// applyFailurePolicy carries on after a failure (retries spent) when the
// node's on_failure says so: skip makes it skipped (the outcome in the
// context stays the previous node's), continue makes it partial_success.
// Either way the failure reason stays on the outcome, and so in the
// node.completed event.
func applyFailurePolicy(policy string, o *nodes.Outcome) {
	switch policy {
	case "skip":
		o.Status = nodes.StatusSkipped
	case "continue":
		o.Status = nodes.StatusPartial
	default:
		return
	}
	o.Retryable = false
	if o.FailureReason == "" {
		o.FailureReason = "failed"
	}
	if o.Notes == "" {
		o.Notes = "on_failure=" + policy + ": " + o.FailureReason
	}
}

// attempts runs the handler until it succeeds or its retries are spent.
func (a *nodeActor) attempts(ctx context.Context, j *job, maxRetries int, backoff func(int) time.Duration, retryOnFail bool, start time.Time) *runResult {
	for attempt := 1; ; attempt++ {
		// Each attempt starts from the firing's input, in the job's own
		// room for it (a copy on the heap per attempt otherwise).
		j.attemptIn = j.in
		in := &j.attemptIn
		in.Attempt = attempt
		in.AttemptID = attemptID(a.s.cfg.SessionID, j.node.ID, j.firing, attempt)
		in.OnUsage = j.usage()
		o := a.call(ctx, j, in)
		if ctx.Err() != nil && !o.Status.IsSuccess() {
			if cause := context.Cause(ctx); cause != nil && cause != context.Canceled && cause != context.DeadlineExceeded {
				o.FailureReason = cause.Error()
			}
			// The session is stopping: report, do not retry.
			return j.result(o, attempt, a.s.clk.Now().Sub(start))
		}
		if o.Status.IsSuccess() || o.Status == nodes.StatusSkipped {
			return j.result(o, attempt, a.s.clk.Now().Sub(start))
		}
		retryable := o.Status == nodes.StatusRetry || (o.Status == nodes.StatusFail && (o.Retryable || retryOnFail))
		if retryable && attempt <= maxRetries {
			if backoff == nil {
				_, backoff = retryPolicy(j.in.Graph, j.node)
			}
			delay := backoff(attempt)
			if o.RetryAfter > delay {
				// The server asked for a longer wait (Retry-After).
				delay = min(o.RetryAfter, maxRetryAfter)
			}
			a.s.Emit(&pb.Event{Kind: "node.retrying", Node: j.node.ID, Status: string(o.Status),
				Attempts: uint32(attempt), Message: retryReason(o),
				Attrs: []*pb.KV{{Key: "delay_ms", Value: strconv.FormatInt(delay.Milliseconds(), 10)}}})
			if !clock.Sleep(ctx, a.s.clk, delay) {
				return j.result(o, attempt, a.s.clk.Now().Sub(start))
			}
			continue
		}
		if o.Status == nodes.StatusRetry {
			// Retries exhausted (spec 3.5): partial success when allowed;
			// an edge whose condition takes the retry (outcome=retry)
			// routes it; else the node fails.
			switch {
			case j.node.Attrs.Bool("allow_partial"):
				o.Status = nodes.StatusPartial
			case a.retryEdge(j, o) != nil:
				if o.FailureReason == "" {
					o.FailureReason = "retries exhausted after " + strconv.Itoa(attempt) + " attempts"
				}
			default:
				o.Status = nodes.StatusFail
				if o.FailureReason == "" {
					o.FailureReason = "retries exhausted after " + strconv.Itoa(attempt) + " attempts"
				}
			}
		}
		return j.result(o, attempt, a.s.clk.Now().Sub(start))
	}
}

// call runs the handler once with the node's timeout, turning errors and
// panics into failed outcomes, whose text is made valid UTF-8
// (Outcome.ValidUTF8).
func (a *nodeActor) call(ctx context.Context, j *job, in *nodes.Input) (o *nodes.Outcome) {
	defer func() { o.ValidUTF8() }()
	if d, ok := j.node.Timeout(); ok && d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = clock.WithTimeout(ctx, a.s.clk, d)
		defer cancel()
	}
	defer func() {
		if r := recover(); r != nil {
			o = &nodes.Outcome{Status: nodes.StatusFail,
				FailureReason: fmt.Sprintf("handler panicked: %v\n%s", r, debug.Stack())}
		}
	}()
	crash.Point("handler")
	out, err := j.h.Handle(ctx, in)
	if err != nil {
		reason := err.Error()
		if errors.Is(err, context.DeadlineExceeded) {
			reason = "timeout: " + reason
		}
		o := &nodes.Outcome{Status: nodes.StatusFail, FailureReason: reason, Retryable: errors.Is(err, agent.ErrRetryable)}
		if out != nil {
			o.Usage = out.Usage
		}
		return o
	}
	if out == nil {
		return &nodes.Outcome{Status: nodes.StatusFail, FailureReason: "handler returned no outcome"}
	}
	if out.Status == "" {
		out.Status = nodes.StatusSuccess
	}
	return out
}

// retryEdge is the edge out of the node whose condition holds for a retry
// outcome (e.g. outcome=retry), nil when there is none.
func (a *nodeActor) retryEdge(j *job, o *nodes.Outcome) *graph.Edge {
	ctx := j.ctx
	if len(o.ContextUpdates) > 0 {
		ctx = make(map[string]string, len(j.ctx)+len(o.ContextUpdates))
		for k, v := range j.ctx {
			ctx[k] = v
		}
		for k, v := range o.ContextUpdates {
			ctx[k] = v
		}
	}
	env := edges.Outcome{Status: string(nodes.StatusRetry), PreferredLabel: o.PreferredLabel, SuggestedNextIDs: o.SuggestedNextIDs}
	return edges.Match(a.s.graph(), j.node.ID, env, ctx)
}

// retryReason says why a firing is retried: its failure reason, else its
// notes (an agent that asks for a retry often explains there), else its
// status.
func retryReason(o *nodes.Outcome) string {
	switch {
	case o.FailureReason != "":
		return o.FailureReason
	case o.Notes != "":
		return o.Notes
	}
	return "the handler returned " + string(o.Status) + " without a reason"
}

// attemptID is <session>/<node>/<firing>/<attempt>, made in one allocation
// (a concatenation and the firing's number were two).
func attemptID(session, node string, firing uint64, attempt int) string {
	var buf [96]byte
	b := append(buf[:0], session...)
	b = append(b, '/')
	b = append(b, node...)
	b = append(b, '/')
	b = strconv.AppendUint(b, firing, 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(attempt), 10)
	return string(b)
}
