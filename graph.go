package switchyard

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/nodes"
)

// Graph is a graph to run: built in Go with Agent, Tool, Output, Handler,
// Node and Edge, or read from DOT with ParseDOT and completed with Bind*.
// A Graph is not safe for concurrent modification; once built it may be
// run any number of times, concurrently.
//
// A built pipeline with no start node gets one ("start", shape Mdiamond)
// leading to the first node added; with no exit node, it gets one ("exit",
// shape Msquare) that every node without outgoing edges leads to. A graph
// with kind="session" (GraphAttr("kind", "session")) gets neither: a
// session runs until it is stopped, or until the graph says so (an exit
// node it adds itself).
type Graph struct {
	name  string
	attrs graph.KV
	// Either built here...
	order []string
	nodes map[string]graph.KV
	edges []edgeSpec
	// ...or read from DOT.
	file string
	src  []byte

	types map[string]nodes.Handler // handler types bound to Go code
	errs  []error

	// built is the last Build's graph and what it was built from; mu
	// guards it (concurrent runs build the graph each).
	mu    sync.Mutex
	built *builtGraph
}

// builtGraph is a Build's result, kept for the next Build while the
// Graph is unchanged. A Graph only grows (nodes, edges and bound types
// are added, never removed or changed: Node copies its attributes), so
// its counts tell whether it changed; the DOT source is compared whole.
// Building it again at every Run was 5-8% of the CPU of a pipeline of
// Go agents without checkpoints, whatever its length.
type builtGraph struct {
	g                   *graph.Graph
	nodes, edges, types int
	src                 []byte
}

// unchanged reports whether g is what b was built from.
func (b *builtGraph) unchanged(g *Graph) bool {
	return b.nodes == len(g.order) && b.edges == len(g.edges) && b.types == len(g.types) &&
		(b.src == nil) == (g.src == nil) && bytes.Equal(b.src, g.src)
}

type edgeSpec struct {
	from, to string
	attrs    graph.KV
}

// GraphOption sets a graph attribute.
type GraphOption func(graph.KV)

// Goal sets the graph's goal ($goal in prompts, graph.goal in the state).
func Goal(goal string) GraphOption { return func(kv graph.KV) { kv["goal"] = goal } }

// GraphAttr sets any graph attribute of the DOT reference (budgets,
// default_max_retries, stall_timeout...).
func GraphAttr(key, value string) GraphOption { return func(kv graph.KV) { kv[key] = value } }

// New starts a graph built in Go.
func New(name string, opts ...GraphOption) *Graph {
	g := &Graph{name: name, attrs: graph.KV{}, nodes: map[string]graph.KV{}, types: map[string]nodes.Handler{}}
	for _, o := range opts {
		o(g.attrs)
	}
	return g
}

// ParseDOT reads a graph from DOT source (file names it in diagnostics).
// Nodes whose type is bound to Go code with the Bind methods run it; the
// graph is validated when it is run (or Build is called), once every type
// is bound.
func ParseDOT(file string, src []byte) *Graph {
	return &Graph{file: file, src: src, nodes: map[string]graph.KV{}, types: map[string]nodes.Handler{}}
}

// LoadDOT reads a DOT file (see ParseDOT).
func LoadDOT(path string) (*Graph, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseDOT(path, src), nil
}

// NodeOption configures a node.
type NodeOption func(*nodeSpec)

type nodeSpec struct {
	attrs graph.KV
	mws   []Middleware
}

// Attr sets a node attribute of the DOT reference (timeout, max_retries,
// goal_gate, trigger...).
func Attr(key, value string) NodeOption { return func(n *nodeSpec) { n.attrs[key] = value } }

// InputKey makes an agent or tool node read its input from this state key
// (a node id, or any context key) instead of the last output.
func InputKey(key string) NodeOption { return Attr("input_key", key) }

// Use wraps this node's handler with middleware (inside the session-wide
// middleware of WithMiddleware), the first outermost.
func Use(mws ...Middleware) NodeOption {
	return func(n *nodeSpec) { n.mws = append(n.mws, mws...) }
}

// ErrorPolicy says what a node's failure does; the zero value propagates.
type ErrorPolicy struct {
	retries int
	then    string // on_failure after the retries
}

// Error policies.
var (
	// Propagate lets a failure take the failure routing: an edge with
	// condition outcome=fail, a retry_target, else the session fails.
	Propagate = ErrorPolicy{}
	// Skip marks the failed node skipped and carries on along its edges;
	// it adds nothing to the state.
	Skip = ErrorPolicy{then: "skip"}
	// Continue marks the failed node partial_success and carries on.
	Continue = ErrorPolicy{then: "continue"}
)

// Retry runs a failing node again, up to n more times with the graph's
// backoff, then applies then (Propagate when omitted).
func Retry(n int, then ...ErrorPolicy) ErrorPolicy {
	p := ErrorPolicy{retries: n}
	if len(then) > 0 {
		p.then = then[0].then
	}
	return p
}

// OnError sets the node's error policy. It is the node attributes
// max_retries, retry_on_fail and on_failure, so a DOT node has the same
// policy with the same attributes.
func OnError(p ErrorPolicy) NodeOption {
	return func(n *nodeSpec) {
		if p.retries > 0 {
			n.attrs["max_retries"] = strconv.Itoa(p.retries)
			n.attrs["retry_on_fail"] = "true"
		}
		if p.then != "" {
			n.attrs["on_failure"] = p.then
		}
	}
}

// Agent adds a node running a Go agent. Its input is the state key of
// InputKey; else, in a reactive session (kind="session"), the text of the
// envelopes that fired it, joined by a blank line in arrival order
// (State.Messages from StateFrom(ctx) has each of them); else the last
// output, else the session input.
func (g *Graph) Agent(id string, a Agent, opts ...NodeOption) *Graph {
	return g.goNode(id, agentHandler{a: a}, opts)
}

// Tool adds a node calling a Go tool with the parameters mapper builds
// from the state (nil: {"input": the node's input}).
func (g *Graph) Tool(id string, t Tool, mapper ParamMapper, opts ...NodeOption) *Graph {
	return g.goNode(id, toolHandler{t: t, mapper: mapper}, opts)
}

// Output adds an output node: its transform selects or combines results
// from the state (nil: the last output). The session's result is the last
// output, so an output node placed last decides it.
func (g *Graph) Output(id string, f Transform, opts ...NodeOption) *Graph {
	return g.goNode(id, outputHandler{f: f}, opts)
}

// Handler adds a node running a custom handler.
func (g *Graph) Handler(id string, h Handler, opts ...NodeOption) *Graph {
	return g.goNode(id, h, opts)
}

// Node adds a node of the DOT reference by its attributes: an agent CLI
// (prompt=, llm_provider=), a human gate (shape=hexagon), a tool command,
// parallel fan-out, a diamond...
func (g *Graph) Node(id string, attrs graph.KV, opts ...NodeOption) *Graph {
	spec := g.spec(opts, attrs)
	if len(spec.mws) > 0 {
		g.errs = append(g.errs, fmt.Errorf("node %s: Use applies to Go nodes; wrap DOT-style nodes with WithMiddleware", id))
	}
	g.add(id, spec.attrs)
	return g
}

func (g *Graph) goNode(id string, h Handler, opts []NodeOption) *Graph {
	spec := g.spec(opts, nil)
	typ := "go." + id
	spec.attrs["type"] = typ
	g.types[typ] = nodes.Chain(h, spec.mws...)
	g.add(id, spec.attrs)
	return g
}

func (g *Graph) spec(opts []NodeOption, attrs graph.KV) *nodeSpec {
	spec := &nodeSpec{attrs: graph.KV{}}
	for k, v := range attrs {
		spec.attrs[k] = v
	}
	for _, o := range opts {
		o(spec)
	}
	return spec
}

func (g *Graph) add(id string, attrs graph.KV) {
	switch {
	case g.src != nil:
		g.errs = append(g.errs, fmt.Errorf("node %s: a graph read from DOT gets its nodes from the DOT source", id))
		return
	case strings.HasPrefix(id, "_") || id == "outcome" || id == "preferred_label" || id == "last_stage" || id == "last_response" || id == "current_node":
		g.errs = append(g.errs, fmt.Errorf("node %s: the id is a reserved state key", id))
		return
	}
	if _, dup := g.nodes[id]; dup {
		g.errs = append(g.errs, fmt.Errorf("node %s: added twice", id))
		return
	}
	g.order = append(g.order, id)
	g.nodes[id] = attrs
}

// EdgeOption configures an edge.
type EdgeOption func(graph.KV)

// When makes the edge conditional (the condition language of the DOT
// reference: `outcome=success`, `classify=billing && score!=low`).
func When(cond string) EdgeOption { return func(kv graph.KV) { kv["condition"] = cond } }

// Label labels the edge (human gates offer labels as choices).
func Label(label string) EdgeOption { return func(kv graph.KV) { kv["label"] = label } }

// Weight ranks unconditional edges: higher wins.
func Weight(w int) EdgeOption { return func(kv graph.KV) { kv["weight"] = strconv.Itoa(w) } }

// EdgeAttr sets any edge attribute of the DOT reference (delivery,
// loop_restart...).
func EdgeAttr(key, value string) EdgeOption { return func(kv graph.KV) { kv[key] = value } }

// Edge adds an edge.
func (g *Graph) Edge(from, to string, opts ...EdgeOption) *Graph {
	if g.src != nil {
		g.errs = append(g.errs, fmt.Errorf("edge %s -> %s: a graph read from DOT gets its edges from the DOT source", from, to))
		return g
	}
	kv := graph.KV{}
	for _, o := range opts {
		o(kv)
	}
	g.edges = append(g.edges, edgeSpec{from: from, to: to, attrs: kv})
	return g
}

// Chain adds unconditional edges from each node to the next.
func (g *Graph) Chain(ids ...string) *Graph {
	for i := 1; i < len(ids); i++ {
		g.Edge(ids[i-1], ids[i])
	}
	return g
}

// BindAgent makes the nodes of a DOT type run a Go agent.
func (g *Graph) BindAgent(typ string, a Agent) *Graph { return g.BindHandler(typ, agentHandler{a: a}) }

// BindTool makes the nodes of a DOT type call a Go tool.
func (g *Graph) BindTool(typ string, t Tool, mapper ParamMapper) *Graph {
	return g.BindHandler(typ, toolHandler{t: t, mapper: mapper})
}

// BindOutput makes the nodes of a DOT type output nodes.
func (g *Graph) BindOutput(typ string, f Transform) *Graph {
	return g.BindHandler(typ, outputHandler{f: f})
}

// BindHandler makes the nodes of a DOT type run h (it replaces a built-in
// type of the same name).
func (g *Graph) BindHandler(typ string, h Handler) *Graph {
	if !nodes.ValidType(typ) {
		g.errs = append(g.errs, fmt.Errorf("bind %q: %w", typ, nodes.ErrInvalidType))
		return g
	}
	g.types[typ] = h
	return g
}

// Build validates the graph and returns it in the runtime's model: the
// same rules as a DOT file (a DOT graph's errors name file, line and
// column). The result is kept: while the Graph is unchanged, Build (and
// so every Run) returns the same one, which is to be read only.
func (g *Graph) Build() (*graph.Graph, error) {
	if len(g.errs) > 0 {
		return nil, errors.Join(g.errs...)
	}
	g.mu.Lock()
	b := g.built
	g.mu.Unlock()
	if b != nil && b.unchanged(g) {
		return b.g, nil
	}
	known := graph.WithKnownTypes(append(builtinTypes(), g.typeNames()...)...)
	var out *graph.Graph
	var diags graph.Diagnostics
	if g.src != nil {
		out, diags = graph.Load(g.file, g.src, known)
	} else {
		out, diags = g.builder().Build(known)
	}
	if diags.HasErrors() || out == nil {
		var msgs []string
		for _, d := range diags {
			if d.Severity == graph.SeverityError {
				msgs = append(msgs, d.String())
			}
		}
		return nil, fmt.Errorf("switchyard: invalid graph %s:\n%s", g.displayName(), strings.Join(msgs, "\n"))
	}
	// Indexed now (Node indexes on first use): the runs that follow share
	// it, and only read it.
	out.Node("")
	g.mu.Lock()
	g.built = &builtGraph{g: out, nodes: len(g.order), edges: len(g.edges), types: len(g.types), src: bytes.Clone(g.src)}
	g.mu.Unlock()
	return out, nil
}

func (g *Graph) displayName() string {
	if g.file != "" {
		return g.file
	}
	return g.name
}

func (g *Graph) typeNames() []string {
	out := make([]string, 0, len(g.types))
	for t := range g.types {
		out = append(out, t)
	}
	return out
}

// builder adds the implied start and exit nodes and builds the model.
func (g *Graph) builder() *graph.Builder {
	b := graph.New(g.name, g.attrs)
	hasStart, hasExit := false, false
	outgoing := map[string]bool{}
	for _, e := range g.edges {
		outgoing[e.from] = true
	}
	typeOf := func(id string, kv graph.KV) string {
		n := &graph.Node{ID: id, Attrs: graph.Attrs{}}
		for k, v := range kv {
			n.Attrs.Set(k, v)
		}
		return (&graph.Graph{}).HandlerType(n)
	}
	for _, id := range g.order {
		switch typeOf(id, g.nodes[id]) {
		case graph.TypeStart:
			hasStart = true
		case graph.TypeExit:
			hasExit = true
		}
	}
	if strings.EqualFold(g.attrs["kind"], "session") {
		// A reactive session: nothing implied.
		hasStart, hasExit = true, true
	}
	if !hasStart {
		b.Node("start", graph.KV{"shape": "Mdiamond"})
		if len(g.order) > 0 {
			b.Edge("start", g.order[0])
		}
	}
	for _, id := range g.order {
		b.Node(id, g.nodes[id])
	}
	for _, e := range g.edges {
		b.Edge(e.from, e.to, e.attrs)
	}
	if !hasExit {
		b.Node("exit", graph.KV{"shape": "Msquare"})
		for _, id := range g.order {
			if !outgoing[id] {
				b.Edge(id, "exit")
			}
		}
	}
	return b
}

func builtinTypes() []string {
	r := nodes.NewRegistry()
	_ = nodes.RegisterBuiltins(r, nodes.Deps{})
	return r.Types()
}
