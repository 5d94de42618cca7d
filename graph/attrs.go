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

// MaxIterations bounds the node firings of a run (default 10,000).
func (g *Graph) MaxIterations() int {
	if v, ok := g.Attrs.Int("max_iterations"); ok && v > 0 {
		return v
	}
	return DefaultMaxIterations
}

// MaxVisits bounds the visits of each node (default 100).
func (g *Graph) MaxVisits() int {
	if v, ok := g.Attrs.Int("max_visits"); ok && v > 0 {
		return v
	}
	return DefaultMaxVisits
}

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
