package graph

// KV is a set of attributes for the builder.
type KV map[string]string

// Builder builds a graph in Go, without DOT. Build validates it with the
// same rules as Load.
//
//	b := graph.New("review", graph.KV{"goal": "Review the PR"})
//	b.Node("start", graph.KV{"shape": "Mdiamond"})
//	b.Node("review", graph.KV{"prompt": "Review $goal"})
//	b.Node("exit", graph.KV{"shape": "Msquare"})
//	b.Edge("start", "review").Edge("review", "exit")
//	g, diags := b.Build()
type Builder struct {
	g *Graph
}

// New starts a graph with the given graph attributes.
func New(name string, attrs ...KV) *Builder {
	g := &Graph{Name: name, Attrs: Attrs{}}
	for _, kv := range attrs {
		for k, v := range kv {
			g.Attrs.Set(k, v)
		}
	}
	return &Builder{g: g}
}

// Node adds a node (or adds attributes to an existing one). The class
// attribute sets its classes.
func (b *Builder) Node(id string, attrs ...KV) *Builder {
	n := b.g.Node(id)
	if n == nil {
		n = &Node{ID: id, Attrs: Attrs{}}
		b.g.Nodes = append(b.g.Nodes, n)
		// The index Node just made (or checked) takes the new node: a
		// graph of N nodes is built in O(N), not O(N²) reindexing.
		b.g.byID[id] = n
	}
	for _, kv := range attrs {
		for k, v := range kv {
			n.Attrs.Set(k, v)
		}
	}
	if v, ok := n.Attrs["class"]; ok {
		n.Classes = nil
		for _, c := range splitClasses(v.Text) {
			n.addClass(c)
		}
		n.syncClassAttr()
	}
	return b
}

// Edge adds an edge; its endpoints must be added with Node (the
// edge_target_exists rule says so otherwise).
func (b *Builder) Edge(from, to string, attrs ...KV) *Builder {
	e := &Edge{From: from, To: to, Attrs: Attrs{}}
	for _, kv := range attrs {
		for k, v := range kv {
			e.Attrs.Set(k, v)
		}
	}
	b.g.Edges = append(b.g.Edges, e)
	return b
}

// Subgraph adds a subgraph holding the given nodes (added when missing),
// with graph attributes such as budgets. Its label becomes a class of the
// nodes, as in DOT.
func (b *Builder) Subgraph(id string, attrs KV, nodeIDs ...string) *Builder {
	sg := &Subgraph{ID: id, Attrs: Attrs{}}
	for k, v := range attrs {
		sg.Attrs.Set(k, v)
	}
	class := classFromLabel(sg.Attrs.String("label"))
	for _, nid := range nodeIDs {
		b.Node(nid)
		sg.addNode(nid)
		if class != "" {
			n := b.g.Node(nid)
			n.addClass(class)
			n.syncClassAttr()
		}
	}
	b.g.Subgraphs = append(b.g.Subgraphs, sg)
	return b
}

// Build runs the transforms and the lint rules, like Load, and returns the
// graph and its diagnostics.
func (b *Builder) Build(opts ...LoadOption) (*Graph, Diagnostics) {
	b.g.indexEdges()
	ds := prepare(b.g, options(opts))
	return b.g, ds
}

func splitClasses(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			c := trimSpace(s[start:i])
			if c != "" {
				out = append(out, c)
			}
			start = i + 1
		}
	}
	return out
}

func trimSpace(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}
