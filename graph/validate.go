package graph

import (
	"errors"
	"fmt"
	"strings"

	"github.com/switchyard/switchyard/edges/cond"
)

// Rule is a lint rule (spec 7.4). Custom rules are added with WithRules and
// run after the built-ins; a diagnostic a rule returns without a Rule name
// gets the rule's Name, and one without a file gets the graph's.
type Rule interface {
	Name() string
	Check(g *Graph) Diagnostics
}

// RuleFunc adapts a function to Rule.
type RuleFunc struct {
	N string
	F func(g *Graph) Diagnostics
}

// NewRule returns a Rule named name that runs f.
func NewRule(name string, f func(g *Graph) Diagnostics) Rule { return RuleFunc{N: name, F: f} }

// Name returns N.
func (r RuleFunc) Name() string { return r.N }

// Check calls F.
func (r RuleFunc) Check(g *Graph) Diagnostics { return r.F(g) }

// BuiltinTypes are the handler types of the built-in handlers.
var BuiltinTypes = []string{TypeStart, TypeExit, TypeCodergen, TypeHuman, TypeConditional, TypeParallel, TypeFanIn, TypeTool, TypeManagerLoop}

// BuiltinRules returns the lint rules of spec section 7 and Switchyard's
// own, in the order they run. knownTypes are the handler types the runtime
// has registered, for type_known (nil: BuiltinTypes).
func BuiltinRules(knownTypes []string) []Rule {
	if knownTypes == nil {
		knownTypes = BuiltinTypes
	}
	return []Rule{
		NewRule("node_id", ruleNodeIDs),
		NewRule("start_node", ruleStart),
		NewRule("terminal_node", ruleTerminal),
		NewRule("edge_target_exists", ruleEdgeTargets),
		NewRule("start_no_incoming", ruleStartNoIncoming),
		NewRule("exit_no_outgoing", ruleExitNoOutgoing),
		NewRule("reachability", ruleReachability),
		NewRule("condition_syntax", ruleConditions),
		NewRule("stylesheet_syntax", ruleStylesheet),
		TypeKnownRule(knownTypes...),
		NewRule("fidelity_valid", ruleFidelity),
		NewRule("retry_target_exists", ruleRetryTargets),
		NewRule("goal_gate_has_retry", ruleGoalGateRetry),
		NewRule("prompt_on_llm_nodes", rulePrompt),
		NewRule("attr_type", ruleAttrTypes),
		NewRule("join_valid", ruleJoin),
		NewRule("schedule_valid", ruleSchedule),
		NewRule("attr_unknown", ruleAttrUnknown),
	}
}

func nodeDiag(n *Node, sev Severity, rule, format string, args ...any) Diagnostic {
	return Diagnostic{Pos: n.Pos, Severity: sev, Rule: rule, NodeID: n.ID, Message: fmt.Sprintf(format, args...)}
}

func ids(ns []*Node) string {
	var s []string
	for _, n := range ns {
		s = append(s, n.ID)
	}
	return strings.Join(s, ", ")
}

func nodesOfType(g *Graph, typ string) []*Node {
	var out []*Node
	for _, n := range g.Nodes {
		if g.HandlerType(n) == typ {
			out = append(out, n)
		}
	}
	return out
}

// ruleNodeIDs checks ids of graphs built in Go (the parser checks its own).
func ruleNodeIDs(g *Graph) Diagnostics {
	var ds Diagnostics
	for _, n := range g.Nodes {
		if !IsIdentifier(n.ID) || isKeyword(n.ID) {
			ds = append(ds, nodeDiag(n, SeverityError, "node_id", "node id %q is not an identifier ([A-Za-z_][A-Za-z0-9_]*, not a DOT keyword)", n.ID))
		}
	}
	return ds
}

func ruleStart(g *Graph) Diagnostics {
	if g.Kind() == "session" {
		return nil
	}
	s := nodesOfType(g, TypeStart)
	switch len(s) {
	case 0:
		return Diagnostics{{Pos: g.Pos, Severity: SeverityError, Rule: "start_node",
			Message: "the graph has no start node", Fix: "add start [shape=Mdiamond]"}}
	case 1:
		return nil
	}
	return Diagnostics{nodeDiag(s[1], SeverityError, "start_node", "the graph has %d start nodes (%s): exactly one is allowed", len(s), ids(s))}
}

func ruleTerminal(g *Graph) Diagnostics {
	if g.Kind() == "session" {
		return nil
	}
	s := nodesOfType(g, TypeExit)
	switch len(s) {
	case 0:
		return Diagnostics{{Pos: g.Pos, Severity: SeverityError, Rule: "terminal_node",
			Message: "the graph has no exit node", Fix: "add exit [shape=Msquare]"}}
	case 1:
		return nil
	}
	return Diagnostics{nodeDiag(s[1], SeverityError, "terminal_node", "the graph has %d exit nodes (%s): exactly one is allowed", len(s), ids(s))}
}

func ruleEdgeTargets(g *Graph) Diagnostics {
	// A hostile file may use 100,000 undeclared nodes: the first ones are
	// reported, the rest counted (as capDiagnostics would, without
	// formatting them first).
	var ds Diagnostics
	more, first := 0, Pos{}
	add := func(pos Pos, d func() Diagnostic) {
		if len(ds) < maxDiagnosticsPerRule {
			ds = append(ds, d())
			return
		}
		if more == 0 {
			first = pos
		}
		more++
	}
	seen := map[string]bool{}
	for _, r := range g.undeclared {
		if seen[r.id] {
			continue
		}
		seen[r.id] = true
		add(r.pos, func() Diagnostic {
			return Diagnostic{Pos: r.pos, Severity: SeverityError, Rule: "edge_target_exists", NodeID: r.id,
				Message: fmt.Sprintf("node %q is used by an edge but never declared", r.id), Fix: r.id + " [label=\"...\"]"}
		})
	}
	for _, e := range g.Edges {
		for _, id := range []string{e.From, e.To} {
			if g.Node(id) == nil && !seen[id] {
				seen[id] = true
				add(e.Pos, func() Diagnostic {
					return Diagnostic{Pos: e.Pos, Severity: SeverityError, Rule: "edge_target_exists", NodeID: id,
						EdgeFrom: e.From, EdgeTo: e.To, Message: fmt.Sprintf("edge %s -> %s refers to unknown node %q", e.From, e.To, id)}
				})
			}
		}
	}
	if more > 0 {
		ds = append(ds, moreDiagnostics(first, SeverityError, "edge_target_exists", more))
	}
	return ds
}

func ruleStartNoIncoming(g *Graph) Diagnostics {
	if g.Kind() == "session" {
		return nil
	}
	var ds Diagnostics
	for _, n := range nodesOfType(g, TypeStart) {
		for _, e := range g.Incoming(n.ID) {
			ds = append(ds, Diagnostic{Pos: e.Pos, Severity: SeverityError, Rule: "start_no_incoming", NodeID: n.ID,
				EdgeFrom: e.From, EdgeTo: e.To, Message: fmt.Sprintf("the start node %s has an incoming edge from %s", n.ID, e.From)})
		}
	}
	return ds
}

func ruleExitNoOutgoing(g *Graph) Diagnostics {
	if g.Kind() == "session" {
		return nil
	}
	var ds Diagnostics
	for _, n := range nodesOfType(g, TypeExit) {
		for _, e := range g.Outgoing(n.ID) {
			ds = append(ds, Diagnostic{Pos: e.Pos, Severity: SeverityError, Rule: "exit_no_outgoing", NodeID: n.ID,
				EdgeFrom: e.From, EdgeTo: e.To, Message: fmt.Sprintf("the exit node %s has an outgoing edge to %s", n.ID, e.To)})
		}
	}
	return ds
}

// ruleReachability warns about nodes the start node cannot reach (DESIGN
// decision 5), following edges and retry-target jumps.
func ruleReachability(g *Graph) Diagnostics {
	if g.Kind() == "session" {
		return nil
	}
	start := g.StartNode()
	if start == nil {
		return nil
	}
	seen := map[string]bool{start.ID: true}
	queue := []string{start.ID}
	jump := func(id string) {
		if id != "" && g.Node(id) != nil && !seen[id] {
			seen[id] = true
			queue = append(queue, id)
		}
	}
	jump(g.Attrs.String("retry_target"))
	jump(g.Attrs.String("fallback_retry_target"))
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		for _, e := range g.Outgoing(id) {
			jump(e.To)
		}
		if n := g.Node(id); n != nil {
			jump(n.RetryTarget())
			jump(n.FallbackRetryTarget())
			jump(n.Attrs.String("join"))
		}
	}
	var ds Diagnostics
	for _, n := range g.Nodes {
		if !seen[n.ID] && !g.isUndeclared(n.ID) {
			ds = append(ds, nodeDiag(n, SeverityWarning, "reachability", "node %s is not reachable from the start node %s", n.ID, start.ID))
		}
	}
	return ds
}

// ruleConditions compiles every edge condition (once, at load time).
func ruleConditions(g *Graph) Diagnostics {
	var ds Diagnostics
	for _, e := range g.Edges {
		v, ok := e.Attrs["condition"]
		if !ok {
			e.Cond = nil
			continue
		}
		c, err := cond.Parse(v.Text)
		if err != nil {
			p, msg := condErrorPos(v, err)
			if !p.IsValid() {
				p = e.Pos
			}
			ds = append(ds, Diagnostic{Pos: p, Severity: SeverityError, Rule: "condition_syntax", EdgeFrom: e.From, EdgeTo: e.To,
				Message: fmt.Sprintf("edge %s -> %s: condition %q: %s", e.From, e.To, v.Text, msg)})
			continue
		}
		e.Cond = c
	}
	// Node attributes that hold conditions (manager.stop_condition).
	for _, n := range g.Nodes {
		for _, k := range n.Attrs.Keys() {
			spec, ok := LookupAttr(ScopeNode, k)
			if !ok || spec.Type != AttrCondition {
				continue
			}
			v := n.Attrs[k]
			if _, err := cond.Parse(v.Text); err != nil {
				p, msg := condErrorPos(v, err)
				if !p.IsValid() {
					p = n.Pos
				}
				ds = append(ds, Diagnostic{Pos: p, Severity: SeverityError, Rule: "condition_syntax", NodeID: n.ID,
					Message: fmt.Sprintf("node %s: %s %q: %s", n.ID, k, v.Text, msg)})
			}
		}
	}
	return ds
}

// condErrorPos places a condition's syntax error inside the value and
// returns its message without the offset (the position says it).
func condErrorPos(v Value, err error) (Pos, string) {
	var se *cond.SyntaxError
	if errors.As(err, &se) {
		return offsetPos(v, se.Offset), se.Msg
	}
	return v.Pos, err.Error()
}

func ruleStylesheet(g *Graph) Diagnostics {
	v, ok := g.Attrs["model_stylesheet"]
	if !ok || strings.TrimSpace(v.Text) == "" {
		return nil
	}
	if _, err := ParseStylesheet(v.Text); err != nil {
		se := err.(*StyleError)
		p := offsetPos(v, se.Offset)
		if !p.IsValid() {
			p = g.Pos
		}
		return Diagnostics{{Pos: p, Severity: SeverityError, Rule: "stylesheet_syntax", Message: "model_stylesheet: " + se.Msg}}
	}
	return nil
}

// TypeKnownRule is the type_known rule: a warning for every explicit
// `type` that is not one of known.
func TypeKnownRule(known ...string) Rule {
	set := make(map[string]bool, len(known)+1)
	set[TypeRemote] = true // a worker's, never a registered handler's
	for _, t := range known {
		set[t] = true
	}
	return NewRule("type_known", func(g *Graph) Diagnostics {
		var ds Diagnostics
		for _, n := range g.Nodes {
			v, ok := n.Attrs["type"]
			if ok && !set[v.Text] {
				d := nodeDiag(n, SeverityWarning, "type_known", "node %s has unknown handler type %q: it falls back to its shape's handler", n.ID, v.Text)
				if v.Pos.IsValid() {
					d.Pos = v.Pos
				}
				ds = append(ds, d)
			}
		}
		return ds
	})
}

var fidelities = map[string]bool{"full": true, "truncate": true, "compact": true, "summary:low": true, "summary:medium": true, "summary:high": true}

func ruleFidelity(g *Graph) Diagnostics {
	var ds Diagnostics
	check := func(v Value, ok bool, where string, pos Pos) {
		if ok && !fidelities[v.Text] {
			if v.Pos.IsValid() {
				pos = v.Pos
			}
			ds = append(ds, Diagnostic{Pos: pos, Severity: SeverityWarning, Rule: "fidelity_valid",
				Message: fmt.Sprintf("%s: fidelity %q is not one of full, truncate, compact, summary:low, summary:medium, summary:high", where, v.Text)})
		}
	}
	v, ok := g.Attrs["default_fidelity"]
	check(v, ok, "graph", g.Pos)
	for _, n := range g.Nodes {
		v, ok := n.Attrs["fidelity"]
		check(v, ok, "node "+n.ID, n.Pos)
	}
	for _, e := range g.Edges {
		v, ok := e.Attrs["fidelity"]
		check(v, ok, "edge "+e.From+" -> "+e.To, e.Pos)
	}
	return ds
}

func ruleRetryTargets(g *Graph) Diagnostics {
	var ds Diagnostics
	for _, k := range []string{"retry_target", "fallback_retry_target"} {
		if v, ok := g.Attrs[k]; ok && g.Node(v.Text) == nil {
			ds = append(ds, Diagnostic{Pos: v.Pos, Severity: SeverityWarning, Rule: "retry_target_exists",
				Message: fmt.Sprintf("graph %s %q is not a node", k, v.Text)})
		}
		for _, n := range g.Nodes {
			if v, ok := n.Attrs[k]; ok && g.Node(v.Text) == nil {
				d := nodeDiag(n, SeverityWarning, "retry_target_exists", "node %s: %s %q is not a node", n.ID, k, v.Text)
				if v.Pos.IsValid() {
					d.Pos = v.Pos
				}
				ds = append(ds, d)
			}
		}
	}
	return ds
}

func ruleGoalGateRetry(g *Graph) Diagnostics {
	var ds Diagnostics
	graphTarget := g.Attrs.String("retry_target") != "" || g.Attrs.String("fallback_retry_target") != ""
	for _, n := range g.Nodes {
		if n.GoalGate() && n.RetryTarget() == "" && n.FallbackRetryTarget() == "" && !graphTarget {
			ds = append(ds, nodeDiag(n, SeverityWarning, "goal_gate_has_retry",
				"goal gate %s has no retry_target (node or graph): if it is not satisfied the run fails", n.ID))
		}
	}
	return ds
}

// isUndeclared reports whether id was only used by edges: edge_target_exists
// reports it, and the other rules say nothing more about it.
func (g *Graph) isUndeclared(id string) bool {
	return g.undeclaredSet[id]
}

func rulePrompt(g *Graph) Diagnostics {
	var ds Diagnostics
	for _, n := range g.Nodes {
		if g.HandlerType(n) == TypeCodergen && n.Attrs.String("prompt") == "" && n.Attrs.String("label") == "" && !g.isUndeclared(n.ID) {
			ds = append(ds, nodeDiag(n, SeverityWarning, "prompt_on_llm_nodes", "agent node %s has no prompt or label: the agent is asked %q", n.ID, n.ID))
		}
	}
	return ds
}
