package actors

import "github.com/switchyard/switchyard/graph"

// withReverseEdges returns the graph a session runs: every edge written
// with dir=both also delivers the other way, as an edge of its own (with
// the same attributes, on subject sy.<session>.edge.<to>.<from>), so two
// agents can converse over one edge. Pipelines are returned unchanged.
func withReverseEdges(g *graph.Graph) *graph.Graph {
	if g.Kind() != "session" {
		return g
	}
	var extra []*graph.Edge
	for _, e := range g.Edges {
		if !e.Bidirectional() || e.From == e.To {
			continue
		}
		r := &graph.Edge{From: e.To, To: e.From, Attrs: e.Attrs.Clone(), Pos: e.Pos, Cond: e.Cond}
		delete(r.Attrs, "dir")
		extra = append(extra, r)
	}
	if len(extra) == 0 {
		return g
	}
	out := *g
	out.Edges = append(append([]*graph.Edge(nil), g.Edges...), extra...)
	seen := map[[2]string]int{}
	for _, e := range out.Edges {
		k := [2]string{e.From, e.To}
		if e.Index < seen[k] {
			// a reverse edge joining a pair that already has edges gets the next index
			c := *e
			c.Index = seen[k]
			*e = c
		}
		seen[k] = e.Index + 1
	}
	return &out
}
