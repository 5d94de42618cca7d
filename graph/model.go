package graph

import (
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/switchyard/switchyard/edges/cond"
)

// Pos is a position in a source file. Line and Col are 1-based; a zero Pos
// means "no position" (for example a graph built with the Go API).
type Pos struct {
	File string
	Line int
	Col  int
}

// String renders the position as FILE:LINE:COL (FILE omitted when empty).
func (p Pos) String() string {
	s := strconv.Itoa(p.Line) + ":" + strconv.Itoa(p.Col)
	if p.File != "" {
		return p.File + ":" + s
	}
	return s
}

// IsValid reports whether the position was set.
func (p Pos) IsValid() bool { return p.Line > 0 }

// Kind is the lexical type of an attribute value as written.
type Kind uint8

// Value kinds.
const (
	KindString   Kind = iota // a quoted string
	KindInt                  // 42, -1
	KindFloat                // 0.5
	KindBool                 // true, false
	KindDuration             // 250ms, 15m, 1d
	KindBare                 // a bare identifier-like value: box, LR, wait_all
)

// String names the kind.
func (k Kind) String() string {
	switch k {
	case KindString:
		return "string"
	case KindInt:
		return "integer"
	case KindFloat:
		return "float"
	case KindBool:
		return "boolean"
	case KindDuration:
		return "duration"
	case KindBare:
		return "bare"
	}
	return "unknown"
}

// Value is one attribute value: its text (escapes already decoded for
// strings), how it was written, and where.
type Value struct {
	Text   string
	Kind   Kind
	Pos    Pos // position of the value
	KeyPos Pos // position of the key

	raw string // a quoted value's source between the quotes (for positions inside it)
}

// Attrs holds the attributes of a graph, node or edge by key. Keys keep their
// dotted form ("tool_hooks.pre"). Unknown attributes are kept verbatim.
type Attrs map[string]Value

// Has reports whether key is set.
func (a Attrs) Has(key string) bool { _, ok := a[key]; return ok }

// String returns the text of key, or "" when unset.
func (a Attrs) String(key string) string { return a[key].Text }

// Set stores a value with no position (Go API and transforms).
func (a Attrs) Set(key, text string) {
	v := a[key]
	v.Text = text
	v.Kind = guessKind(text)
	v.raw = ""
	a[key] = v
}

// Int returns the integer value of key; ok is false when unset or not an integer.
func (a Attrs) Int(key string) (int, bool) {
	v, ok := a[key]
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(v.Text))
	return n, err == nil
}

// Float returns the float value of key.
func (a Attrs) Float(key string) (float64, bool) {
	v, ok := a[key]
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(v.Text), 64)
	return f, err == nil
}

// Bool returns the boolean value of key (false when unset or not a boolean).
func (a Attrs) Bool(key string) bool {
	v, ok := a[key]
	if !ok || v.Text == "" {
		return false // no error value to allocate on the hot path
	}
	b, err := strconv.ParseBool(strings.TrimSpace(v.Text))
	return err == nil && b
}

// Duration returns the duration value of key. A plain integer is read as
// seconds (reference graphs write timeout=600).
func (a Attrs) Duration(key string) (time.Duration, bool) {
	v, ok := a[key]
	if !ok {
		return 0, false
	}
	d, err := ParseDuration(v.Text)
	return d, err == nil
}

// Keys returns the keys in sorted order.
func (a Attrs) Keys() []string {
	keys := make([]string, 0, len(a))
	for k := range a {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Clone returns a copy of the attributes.
func (a Attrs) Clone() Attrs {
	c := make(Attrs, len(a))
	for k, v := range a {
		c[k] = v
	}
	return c
}

// Graph is a parsed (or built) pipeline or session graph.
type Graph struct {
	Name  string
	Attrs Attrs
	Nodes []*Node // in declaration order
	Edges []*Edge // in declaration order
	// Subgraphs are kept for their attributes (budgets) and members; their
	// nodes are also in Nodes, and their labels are classes of the nodes.
	Subgraphs []*Subgraph
	Pos       Pos

	byID          map[string]*Node
	undeclared    []nodeRef       // edge endpoints no node statement declared
	undeclaredSet map[string]bool // the ids of undeclared
	adj           atomic.Value    // *adjacency of Edges, built on first use
	terms         atomic.Value    // *shapedTerminals of Nodes, built on first use
	derived       atomic.Value    // *derivations of Nodes and Edges (Derive)
}

// derivations are the values made from a graph (Derive); they belong to
// one Nodes and one Edges slice, as adjacency does to Edges.
type derivations struct {
	nodes, edges int
	firstNode    **Node
	firstEdge    **Edge
	m            map[any]any
}

// Derive returns what build makes of g under key, made once while g's
// Nodes and Edges are the same slices: what the runtime reads of a graph
// at the start of every session that runs it (its scheduling, its edges'
// names) is read once per graph. Like Outgoing's index it belongs to the
// slices (appending a node or an edge, or replacing a slice, makes it
// again) and takes nodes, edges and attributes as not changed in place
// once the graph runs. The value is shared by every caller: read-only.
// Concurrent callers may each build it; any of them is right.
func (g *Graph) Derive(key any, build func(*Graph) any) any {
	var firstNode **Node
	if len(g.Nodes) > 0 {
		firstNode = &g.Nodes[0]
	}
	var firstEdge **Edge
	if len(g.Edges) > 0 {
		firstEdge = &g.Edges[0]
	}
	d, _ := g.derived.Load().(*derivations)
	if d != nil && d.nodes == len(g.Nodes) && d.edges == len(g.Edges) && d.firstNode == firstNode && d.firstEdge == firstEdge {
		if v, ok := d.m[key]; ok {
			return v
		}
	} else {
		d = nil
	}
	v := build(g)
	next := &derivations{nodes: len(g.Nodes), edges: len(g.Edges), firstNode: firstNode, firstEdge: firstEdge,
		m: make(map[any]any, 1+len(d.values()))}
	for k, old := range d.values() {
		next.m[k] = old
	}
	next.m[key] = v
	g.derived.Store(next)
	return v
}

// values is d's map (nil for no d).
func (d *derivations) values() map[any]any {
	if d == nil {
		return nil
	}
	return d.m
}

// shapedTerminals says whether some node of a graph is a start (exit) by
// its type or shape; it belongs to one Nodes slice, as adjacency to Edges.
type shapedTerminals struct {
	n           int
	first       **Node
	start, exit bool
}

// shaped reports whether some node is a start (exit) by an explicit type
// or a shape of the table: without one, a pipeline's start and exit are
// found by id (spec 3.2).
func (g *Graph) shaped() *shapedTerminals {
	var first **Node
	if len(g.Nodes) > 0 {
		first = &g.Nodes[0]
	}
	if t, _ := g.terms.Load().(*shapedTerminals); t != nil && t.n == len(g.Nodes) && t.first == first {
		return t
	}
	t := &shapedTerminals{n: len(g.Nodes), first: first}
	for _, n := range g.Nodes {
		typ := n.Attrs.String("type")
		if typ == "" && n.Attrs.Has("shape") {
			typ = shapeTypes[n.Shape()]
		}
		t.start = t.start || typ == TypeStart
		t.exit = t.exit || typ == TypeExit
	}
	g.terms.Store(t)
	return t
}

// startIDs and exitIDs are the ids that name a pipeline's start and exit
// when no node has the shape (spec 3.2, 7.2).
func startID(id string) bool { return id == "start" || id == "Start" }
func exitID(id string) bool  { return id == "exit" || id == "Exit" || id == "end" || id == "End" }

// adjacency indexes a graph's edges by endpoint. It belongs to one Edges
// slice (its first element's address and its length): appending an edge
// or replacing the slice makes a new one. Edges are never changed in
// place once added.
type adjacency struct {
	n       int
	first   **Edge
	out, in map[string][]*Edge
}

// smallGraph is the edge count below which Outgoing and Incoming scan.
const smallGraph = 32

// adjacency returns the index of g's edges, building it when Edges
// changed. Concurrent readers may each build it; any of them is right.
func (g *Graph) adjacency() *adjacency {
	var first **Edge
	if len(g.Edges) > 0 {
		first = &g.Edges[0]
	}
	if a, _ := g.adj.Load().(*adjacency); a != nil && a.n == len(g.Edges) && a.first == first {
		return a
	}
	a := &adjacency{n: len(g.Edges), first: first, out: map[string][]*Edge{}, in: map[string][]*Edge{}}
	for _, e := range g.Edges {
		a.out[e.From] = append(a.out[e.From], e)
		a.in[e.To] = append(a.in[e.To], e)
	}
	g.adj.Store(a)
	return a
}

// Subgraph is a subgraph of the DOT file: its id, its graph attributes and
// the nodes declared or used inside it (nested subgraphs' nodes included).
type Subgraph struct {
	ID    string
	Attrs Attrs
	Nodes []string
	Pos   Pos

	has map[string]bool // Nodes, while parsing
}

// Node is one node of a graph.
type Node struct {
	ID      string
	Attrs   Attrs
	Classes []string // from class="a,b" and enclosing subgraph labels, in order
	Pos     Pos
}

// Edge is one directed edge. Bidirectional edges (dir=both) are one Edge with
// Bidirectional() true.
type Edge struct {
	From  string
	To    string
	Attrs Attrs
	Pos   Pos
	// Index distinguishes edges that join the same (From, To) pair: 0 for the
	// first, 1 for the second... It is the subject suffix of DESIGN.md.
	Index int
	// Cond is the compiled condition (nil when the edge has none). Load and
	// the builder compile it; a malformed condition is a diagnostic.
	Cond *cond.Expr
}

// Node returns the node with the given id, or nil.
func (g *Graph) Node(id string) *Node {
	if g.byID == nil || len(g.byID) != len(g.Nodes) {
		g.reindex()
	}
	return g.byID[id]
}

func (g *Graph) reindex() {
	g.byID = make(map[string]*Node, len(g.Nodes))
	for _, n := range g.Nodes {
		g.byID[n.ID] = n
	}
}

// Outgoing returns the edges leaving id, in declaration order.
func (g *Graph) Outgoing(id string) []*Edge {
	if len(g.Edges) >= smallGraph {
		return slices.Clone(g.adjacency().out[id])
	}
	var out []*Edge
	for _, e := range g.Edges {
		if e.From == id {
			out = append(out, e)
		}
	}
	return out
}

// OutEdges is Outgoing without the copy, for what routes at every firing:
// the slice is the graph's index, which the caller must not change.
func (g *Graph) OutEdges(id string) []*Edge {
	return g.adjacency().out[id]
}

// InEdges is Incoming without the copy, for what reads a node's edges at
// every session's start: the slice is the graph's index, which the caller
// must not change.
func (g *Graph) InEdges(id string) []*Edge {
	return g.adjacency().in[id]
}

// Incoming returns the edges entering id, in declaration order.
func (g *Graph) Incoming(id string) []*Edge {
	if len(g.Edges) >= smallGraph {
		return slices.Clone(g.adjacency().in[id])
	}
	var in []*Edge
	for _, e := range g.Edges {
		if e.To == id {
			in = append(in, e)
		}
	}
	return in
}

// Handler types of the built-in handlers.
const (
	TypeStart       = "start"
	TypeExit        = "exit"
	TypeCodergen    = "codergen"
	TypeHuman       = "wait.human"
	TypeConditional = "conditional"
	TypeParallel    = "parallel"
	TypeFanIn       = "parallel.fan_in"
	TypeTool        = "tool"
	TypeManagerLoop = "stack.manager_loop"
	// TypeRemote has no handler in the session's process: a worker that
	// follows the worker protocol does the node's work (docs/workers.md).
	TypeRemote      = "remote"
	DefaultShape    = "box"
	DefaultNodeType = TypeCodergen
)

// shapeTypes is the canonical Attractor shape table plus the aliases of
// DESIGN.md "Shapes". "ellipse" is resolved by position in HandlerType.
var shapeTypes = map[string]string{
	"Mdiamond":      TypeStart,
	"Msquare":       TypeExit,
	"box":           TypeCodergen,
	"hexagon":       TypeHuman,
	"diamond":       TypeConditional,
	"component":     TypeParallel,
	"tripleoctagon": TypeFanIn,
	"parallelogram": TypeTool,
	"house":         TypeManagerLoop,
	"invhouse":      TypeFanIn,
	"tab":           TypeManagerLoop,
}

// ShapeType returns the handler type the shape table gives a shape, and
// whether the shape is in the table. "ellipse" is not: see HandlerType.
func ShapeType(shape string) (string, bool) {
	t, ok := shapeTypes[shape]
	return t, ok
}

// ShapesOf returns the shapes the shape table maps to handler type t,
// sorted (aliases included; none for types no shape selects).
func ShapesOf(t string) []string {
	out := []string{}
	for s, st := range shapeTypes {
		if st == t {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// Shape returns the node's shape (default "box").
func (n *Node) Shape() string {
	if s := n.Attrs.String("shape"); s != "" {
		return s
	}
	return DefaultShape
}

// Label returns the node's label, defaulting to its id.
func (n *Node) Label() string {
	if s := n.Attrs.String("label"); s != "" {
		return s
	}
	return n.ID
}

// HandlerType resolves the node's handler type: an explicit `type` wins;
// a node without a shape whose id is start/Start or exit/Exit/end/End is
// the start or exit, and so is such a node of any shape in a pipeline where
// no node has the start (exit) shape or type (spec 3.2: Mdiamond, else the
// id); then the shape table, then "ellipse" by position (no incoming edges: start; no
// outgoing edges: exit), then the default (codergen). Whether an explicit
// type is registered is checked by the runtime and the type_known lint rule.
func (g *Graph) HandlerType(n *Node) string {
	if t := n.Attrs.String("type"); t != "" {
		return t
	}
	if !n.Attrs.Has("shape") {
		// Without a shape, the conventional ids name the terminals (spec 3.1).
		switch n.ID {
		case "start", "Start":
			return TypeStart
		case "exit", "Exit", "end", "End":
			return TypeExit
		}
	}
	if (startID(n.ID) || exitID(n.ID)) && g.Kind() != "session" {
		if t := g.shaped(); startID(n.ID) && !t.start {
			return TypeStart
		} else if exitID(n.ID) && !t.exit {
			return TypeExit
		}
	}
	shape := n.Shape()
	if t, ok := shapeTypes[shape]; ok {
		return t
	}
	if shape == "ellipse" {
		switch {
		case len(g.Incoming(n.ID)) == 0:
			return TypeStart
		case len(g.Outgoing(n.ID)) == 0:
			return TypeExit
		}
	}
	return DefaultNodeType
}

// Label returns the edge's label ("" when unset).
func (e *Edge) Label() string { return e.Attrs.String("label") }

// Condition returns the edge's condition source ("" when unset).
func (e *Edge) Condition() string { return e.Attrs.String("condition") }

// Weight returns the edge's weight (default 0).
func (e *Edge) Weight() int { w, _ := e.Attrs.Int("weight"); return w }

// Bidirectional reports whether the edge was written with dir=both.
func (e *Edge) Bidirectional() bool { return e.Attrs.String("dir") == "both" }

// LoopRestart reports loop_restart=true.
func (e *Edge) LoopRestart() bool { return e.Attrs.Bool("loop_restart") }

func guessKind(text string) Kind {
	if !mayBeNumber(text) {
		// Most values are words: strconv's errors for them cost two
		// allocations each, for every attribute of every node built.
		if text == "true" || text == "false" {
			return KindBool
		}
		return KindString
	}
	if _, err := strconv.Atoi(text); err == nil {
		return KindInt
	}
	if _, err := strconv.ParseFloat(text, 64); err == nil {
		return KindFloat
	}
	if text == "true" || text == "false" {
		return KindBool
	}
	return KindString
}

// mayBeNumber reports whether text starts as strconv.Atoi or ParseFloat
// may accept: a digit, a sign, a point, or inf / nan in any case.
func mayBeNumber(text string) bool {
	if text == "" {
		return false
	}
	switch c := text[0]; {
	case c >= '0' && c <= '9', c == '+', c == '-', c == '.', c == 'i', c == 'I', c == 'n', c == 'N':
		return true
	}
	return false
}
