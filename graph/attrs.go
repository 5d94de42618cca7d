package graph

import (
	"strings"
	"time"
)

// Defaults of DESIGN decision 9.
const (
	DefaultMaxVisits     = 100
	DefaultMaxIterations = 10000
)

// Prompt returns the node's prompt ($goal already expanded by Load).
func (n *Node) Prompt() string { return n.Attrs.String("prompt") }

// MaxRetries is the node's max_retries, else the graph's
// default_max_retries (alias default_max_retry), else 0.
func (n *Node) MaxRetries(g *Graph) int {
	if v, ok := n.Attrs.Int("max_retries"); ok && v >= 0 {
		return v
	}
	if g != nil {
		return g.DefaultMaxRetries()
	}
	return 0
}

// GoalGate reports goal_gate=true.
func (n *Node) GoalGate() bool { return n.Attrs.Bool("goal_gate") }

// RetryTarget is the node's retry_target.
func (n *Node) RetryTarget() string { return n.Attrs.String("retry_target") }

// FallbackRetryTarget is the node's fallback_retry_target.
func (n *Node) FallbackRetryTarget() string { return n.Attrs.String("fallback_retry_target") }

// Timeout is the node's timeout, if set (a plain integer is seconds).
func (n *Node) Timeout() (time.Duration, bool) { return n.Attrs.Duration("timeout") }

// AutoStatus reports auto_status=true.
func (n *Node) AutoStatus() bool { return n.Attrs.Bool("auto_status") }

// AllowPartial reports allow_partial=true.
func (n *Node) AllowPartial() bool { return n.Attrs.Bool("allow_partial") }

// Fidelity is the node's fidelity, else the graph's default_fidelity, else "compact".
func (n *Node) Fidelity(g *Graph) string {
	if f := n.Attrs.String("fidelity"); f != "" {
		return f
	}
	if g != nil {
		if f := g.Attrs.String("default_fidelity"); f != "" {
			return f
		}
	}
	return "compact"
}

// ThreadID is the node's thread_id.
func (n *Node) ThreadID() string { return n.Attrs.String("thread_id") }

// Goal is the graph's goal.
func (g *Graph) Goal() string { return g.Attrs.String("goal") }

// Kind is "session" for reactive sessions (kind="session"), else "pipeline".
func (g *Graph) Kind() string {
	if strings.EqualFold(g.Attrs.String("kind"), "session") {
		return "session"
	}
	return "pipeline"
}

// DefaultMaxRetries is default_max_retries (alias default_max_retry), else 0.
func (g *Graph) DefaultMaxRetries() int {
	if v, ok := g.Attrs.Int("default_max_retries"); ok && v >= 0 {
		return v
	}
	if v, ok := g.Attrs.Int("default_max_retry"); ok && v >= 0 {
		return v
	}
	return 0
}

// MaxIterations bounds the node firings of a run: the count of
// IterationLimit (0: no cap).
func (g *Graph) MaxIterations() int { return g.IterationLimit().N }

// MaxVisits bounds the visits of each node: the count of VisitLimit (0: no
// cap).
func (g *Graph) MaxVisits() int { return g.VisitLimit().N }

// StartNode is the node of handler type start, else the node with id start
// or Start; nil when there is none (or several).
func (g *Graph) StartNode() *Node {
	return g.terminal(TypeStart, "start", "Start")
}

// ExitNode is the node of handler type exit, else the node with id exit,
// Exit or end; nil when there is none (or several).
func (g *Graph) ExitNode() *Node {
	return g.terminal(TypeExit, "exit", "Exit", "end")
}

func (g *Graph) terminal(typ string, ids ...string) *Node {
	var found []*Node
	for _, n := range g.Nodes {
		if g.HandlerType(n) == typ {
			found = append(found, n)
		}
	}
	if len(found) == 1 {
		return found[0]
	}
	if len(found) > 1 {
		return nil
	}
	for _, id := range ids {
		if n := g.Node(id); n != nil {
			return n
		}
	}
	return nil
}

// LLMModel is the node's llm_model (set on the node, by a node default or
// by the stylesheet); "" lets the runtime choose.
func (n *Node) LLMModel() string { return n.Attrs.String("llm_model") }

// LLMProvider is the node's llm_provider; "" means "from the model".
func (n *Node) LLMProvider() string { return n.Attrs.String("llm_provider") }

// ReasoningEffort is the node's reasoning_effort, default "high".
func (n *Node) ReasoningEffort() string {
	if s := n.Attrs.String("reasoning_effort"); s != "" {
		return s
	}
	return "high"
}

// ToolCommand is a tool node's tool_command.
func (n *Node) ToolCommand() string { return n.Attrs.String("tool_command") }

// RetryOnFail reports retry_on_fail=true (a plain FAIL is retried too).
func (n *Node) RetryOnFail() bool { return n.Attrs.Bool("retry_on_fail") }

// OnFailure is the node's on_failure: "route", "exit" or "" (the default
// failure routing of DESIGN decision 3).
func (n *Node) OnFailure() string { return n.Attrs.String("on_failure") }

// Trigger is the node's trigger mode as written: any, all, manual or
// schedule ("" when unset; the scheduler picks the default).
func (n *Node) Trigger() string { return n.Attrs.String("trigger") }

// Schedule is the node's cron spec (trigger=schedule).
func (n *Node) Schedule() string { return n.Attrs.String("schedule") }

// Join is the node's join: all, any or quorum:N, or on a parallel node the
// id of its fan-in node ("" when unset).
func (n *Node) Join() string { return n.Attrs.String("join") }

// JoinTimeout is the node's join_timeout, if set.
func (n *Node) JoinTimeout() (time.Duration, bool) { return n.Attrs.Duration("join_timeout") }

// Mode is an agent node's mode: "interactive" (a conversation), "auto"
// (ticks until done), or "" (one run per firing, the default).
func (n *Node) Mode() string { return n.Attrs.String("mode") }

// Role is the node's role ("" when unset).
func (n *Node) Role() string { return n.Attrs.String("role") }

// Locks are the node's advisory file locks (locks="a,b"), trimmed.
func (n *Node) Locks() []string {
	var out []string
	for _, l := range strings.Split(n.Attrs.String("locks"), ",") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// MaxVisits is how often the node may run: the count of VisitLimit (0: no
// cap).
func (n *Node) MaxVisits(g *Graph) int { return n.VisitLimit(g).N }

// Fidelity is the edge's fidelity ("" when unset).
func (e *Edge) Fidelity() string { return e.Attrs.String("fidelity") }

// ThreadID is the edge's thread_id ("" when unset).
func (e *Edge) ThreadID() string { return e.Attrs.String("thread_id") }

// Delivery is the edge's delivery mode: queue (the default), latest or
// debounce.
func (e *Edge) Delivery() string {
	if s := e.Attrs.String("delivery"); s != "" {
		return s
	}
	return "queue"
}

// Debounce is the edge's debounce window, if set.
func (e *Edge) Debounce() (time.Duration, bool) { return e.Attrs.Duration("debounce") }

// ResolveFidelity is the fidelity a node runs with when entered over edge e
// (nil for the first node): the edge's, else the node's, else the graph's
// default_fidelity, else "compact" (spec 5.4).
func ResolveFidelity(g *Graph, e *Edge, n *Node) string {
	if e != nil {
		if f := e.Fidelity(); f != "" {
			return f
		}
	}
	return n.Fidelity(g)
}

// Label is the graph's label.
func (g *Graph) Label() string { return g.Attrs.String("label") }

// RetryTarget is the graph's retry_target.
func (g *Graph) RetryTarget() string { return g.Attrs.String("retry_target") }

// FallbackRetryTarget is the graph's fallback_retry_target.
func (g *Graph) FallbackRetryTarget() string { return g.Attrs.String("fallback_retry_target") }

// DefaultFidelity is the graph's default_fidelity, else "compact".
func (g *Graph) DefaultFidelity() string {
	if f := g.Attrs.String("default_fidelity"); f != "" {
		return f
	}
	return "compact"
}

// ModelStylesheet is the graph's model_stylesheet source.
func (g *Graph) ModelStylesheet() string { return g.Attrs.String("model_stylesheet") }

// MaxInFlight is the graph's max_in_flight (0: no cap).
func (g *Graph) MaxInFlight() int {
	if v, ok := g.Attrs.Int("max_in_flight"); ok && v > 0 {
		return v
	}
	return 0
}

// StallTimeout is the graph's stall_timeout, if set.
func (g *Graph) StallTimeout() (time.Duration, bool) { return g.Attrs.Duration("stall_timeout") }

// WorkflowMode is the graph's workflow_mode ("" when unset).
func (g *Graph) WorkflowMode() string { return g.Attrs.String("workflow_mode") }
