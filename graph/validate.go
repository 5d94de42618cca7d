package graph

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/switchyard/switchyard/edges/cond"
)

// Rule is a lint rule. Custom rules are added with WithRules and run after
// the built-ins.
type Rule interface {
	Name() string
	Check(g *Graph, known map[string]bool) Diagnostics
}

// RuleFunc adapts a function to Rule.
type RuleFunc struct {
	N string
	F func(g *Graph, known map[string]bool) Diagnostics
}

// Name returns N.
func (r RuleFunc) Name() string { return r.N }

// Check calls F.
func (r RuleFunc) Check(g *Graph, known map[string]bool) Diagnostics { return r.F(g, known) }

// BuiltinTypes are the handler types of the built-in handlers.
var BuiltinTypes = []string{TypeStart, TypeExit, TypeCodergen, TypeHuman, TypeConditional, TypeParallel, TypeFanIn, TypeTool, TypeManagerLoop}

// BuiltinRules are the lint rules of spec section 7 and Switchyard's own.
var BuiltinRules = []Rule{
	RuleFunc{"node_id", ruleNodeIDs},
	RuleFunc{"start_node", ruleStart},
	RuleFunc{"terminal_node", ruleTerminal},
	RuleFunc{"edge_target_exists", ruleEdgeTargets},
	RuleFunc{"start_no_incoming", ruleStartNoIncoming},
	RuleFunc{"exit_no_outgoing", ruleExitNoOutgoing},
	RuleFunc{"reachability", ruleReachability},
	RuleFunc{"condition_syntax", ruleConditions},
	RuleFunc{"stylesheet_syntax", ruleStylesheet},
	RuleFunc{"type_known", ruleTypeKnown},
	RuleFunc{"fidelity_valid", ruleFidelity},
	RuleFunc{"retry_target_exists", ruleRetryTargets},
	RuleFunc{"goal_gate_has_retry", ruleGoalGateRetry},
	RuleFunc{"prompt_on_llm_nodes", rulePrompt},
	RuleFunc{"attr_type", ruleAttrTypes},
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
func ruleNodeIDs(g *Graph, _ map[string]bool) Diagnostics {
	var ds Diagnostics
	for _, n := range g.Nodes {
		if !IsIdentifier(n.ID) || isKeyword(n.ID) {
			ds = append(ds, nodeDiag(n, SeverityError, "node_id", "node id %q is not an identifier ([A-Za-z_][A-Za-z0-9_]*, not a DOT keyword)", n.ID))
		}
	}
	return ds
}

func ruleStart(g *Graph, _ map[string]bool) Diagnostics {
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

func ruleTerminal(g *Graph, _ map[string]bool) Diagnostics {
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

func ruleEdgeTargets(g *Graph, _ map[string]bool) Diagnostics {
	var ds Diagnostics
	seen := map[string]bool{}
	for _, r := range g.undeclared {
		if seen[r.id] {
			continue
		}
		seen[r.id] = true
		ds = append(ds, Diagnostic{Pos: r.pos, Severity: SeverityError, Rule: "edge_target_exists", NodeID: r.id,
			Message: fmt.Sprintf("node %q is used by an edge but never declared", r.id), Fix: r.id + " [label=\"...\"]"})
	}
	for _, e := range g.Edges {
		for _, id := range []string{e.From, e.To} {
			if g.Node(id) == nil && !seen[id] {
				seen[id] = true
				ds = append(ds, Diagnostic{Pos: e.Pos, Severity: SeverityError, Rule: "edge_target_exists", NodeID: id,
					EdgeFrom: e.From, EdgeTo: e.To, Message: fmt.Sprintf("edge %s -> %s refers to unknown node %q", e.From, e.To, id)})
			}
		}
	}
	return ds
}

func ruleStartNoIncoming(g *Graph, _ map[string]bool) Diagnostics {
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

func ruleExitNoOutgoing(g *Graph, _ map[string]bool) Diagnostics {
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
func ruleReachability(g *Graph, _ map[string]bool) Diagnostics {
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
		if !seen[n.ID] {
			ds = append(ds, nodeDiag(n, SeverityWarning, "reachability", "node %s is not reachable from the start node %s", n.ID, start.ID))
		}
	}
	return ds
}

// ruleConditions compiles every edge condition (once, at load time).
func ruleConditions(g *Graph, _ map[string]bool) Diagnostics {
	var ds Diagnostics
	for _, e := range g.Edges {
		v, ok := e.Attrs["condition"]
		if !ok {
			e.Cond = nil
			continue
		}
		c, err := cond.Parse(v.Text)
		if err != nil {
			off := 0
			if se, ok := err.(*cond.SyntaxError); ok {
				off = se.Offset
			}
			p := offsetPos(v, off)
			if !p.IsValid() {
				p = e.Pos
			}
			ds = append(ds, Diagnostic{Pos: p, Severity: SeverityError, Rule: "condition_syntax", EdgeFrom: e.From, EdgeTo: e.To,
				Message: fmt.Sprintf("edge %s -> %s: condition %q: %v", e.From, e.To, v.Text, err)})
			continue
		}
		e.Cond = c
	}
	return ds
}

func ruleStylesheet(g *Graph, _ map[string]bool) Diagnostics {
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

func ruleTypeKnown(g *Graph, known map[string]bool) Diagnostics {
	var ds Diagnostics
	for _, n := range g.Nodes {
		v, ok := n.Attrs["type"]
		if ok && !known[v.Text] {
			d := nodeDiag(n, SeverityWarning, "type_known", "node %s has unknown handler type %q: it falls back to its shape's handler", n.ID, v.Text)
			if v.Pos.IsValid() {
				d.Pos = v.Pos
			}
			ds = append(ds, d)
		}
	}
	return ds
}

var fidelities = map[string]bool{"full": true, "truncate": true, "compact": true, "summary:low": true, "summary:medium": true, "summary:high": true}

func ruleFidelity(g *Graph, _ map[string]bool) Diagnostics {
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

func ruleRetryTargets(g *Graph, _ map[string]bool) Diagnostics {
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

func ruleGoalGateRetry(g *Graph, _ map[string]bool) Diagnostics {
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

func rulePrompt(g *Graph, _ map[string]bool) Diagnostics {
	var ds Diagnostics
	for _, n := range g.Nodes {
		if g.HandlerType(n) == TypeCodergen && n.Attrs.String("prompt") == "" && n.Attrs.String("label") == "" {
			ds = append(ds, nodeDiag(n, SeverityWarning, "prompt_on_llm_nodes", "agent node %s has no prompt or label: the agent is asked %q", n.ID, n.ID))
		}
	}
	return ds
}

var (
	intAttrs   = []string{"max_retries", "weight", "max_visits", "max_iterations", "max_parallel", "manager.max_cycles", "stall_after", "max_in_flight", "budget_tokens", "default_max_retries", "default_max_retry"}
	boolAttrs  = []string{"goal_gate", "allow_partial", "auto_status", "loop_restart", "retry_on_fail", "stack.child_autostart"}
	floatAttrs = []string{"budget_cost"}
	enumAttrs  = map[string][]string{
		"trigger":          {"any", "all", "manual", "schedule"},
		"delivery":         {"queue", "latest", "debounce"},
		"on_failure":       {"route", "exit"},
		"mode":             {"interactive", "auto"},
		"kind":             {"pipeline", "session"},
		"reasoning_effort": {"low", "medium", "high"},
		"dir":              {"forward", "back", "both", "none"},
		"workflow_mode":    {"planning", "implementation"},
		"retry_policy":     {"none", "standard", "aggressive", "linear", "patient"},
	}
)

// ruleAttrTypes checks the values of the attributes Switchyard reads.
func ruleAttrTypes(g *Graph, _ map[string]bool) Diagnostics {
	var ds Diagnostics
	check := func(attrs Attrs, where string, fallback Pos) {
		bad := func(k string, v Value, want string) {
			p := v.Pos
			if !p.IsValid() {
				p = fallback
			}
			ds = append(ds, Diagnostic{Pos: p, Severity: SeverityError, Rule: "attr_type",
				Message: fmt.Sprintf("%s: %s=%q: want %s", where, k, v.Text, want)})
		}
		for _, k := range intAttrs {
			if v, ok := attrs[k]; ok {
				if _, err := strconv.Atoi(strings.TrimSpace(v.Text)); err != nil {
					bad(k, v, "an integer")
				}
			}
		}
		for _, k := range boolAttrs {
			if v, ok := attrs[k]; ok && v.Text != "true" && v.Text != "false" {
				bad(k, v, "true or false")
			}
		}
		for _, k := range floatAttrs {
			if v, ok := attrs[k]; ok {
				if _, err := strconv.ParseFloat(strings.TrimSpace(v.Text), 64); err != nil {
					bad(k, v, "a number")
				}
			}
		}
		keys := make([]string, 0, len(enumAttrs))
		for k := range enumAttrs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if v, ok := attrs[k]; ok && v.Text != "" {
				allowed := enumAttrs[k]
				okv := false
				for _, a := range allowed {
					if v.Text == a {
						okv = true
					}
				}
				if !okv {
					bad(k, v, "one of "+strings.Join(allowed, ", "))
				}
			}
		}
		for k, v := range attrs {
			if durationKeys[k] && v.Text != "" {
				if _, err := ParseDuration(v.Text); err != nil {
					bad(k, v, "a duration like 250ms, 30s, 15m, 2h, 1d")
				}
			}
		}
	}
	check(g.Attrs, "graph", g.Pos)
	for _, n := range g.Nodes {
		check(n.Attrs, "node "+n.ID, n.Pos)
	}
	for _, e := range g.Edges {
		check(e.Attrs, "edge "+e.From+" -> "+e.To, e.Pos)
	}
	return ds
}
