package actors

import (
	"github.com/switchyard/switchyard/edges"
	"github.com/switchyard/switchyard/graph"
)

// graphNames is what a System reads of its graph that no session changes:
// each edge's id (edges.EdgeID) and the fan-in node of each parallel node.
// It is made once per graph (graph.Graph.Derive) and shared read-only by
// the sessions that run it: every Run of one graph made the edges' ids
// three times over, at its start.
type graphNames struct {
	ids   map[*graph.Edge]string
	joins map[string]string // joinNodes
}

type namesKey struct{}

// namesOf is g's graphNames.
func namesOf(g *graph.Graph) *graphNames {
	return g.Derive(namesKey{}, func(g *graph.Graph) any {
		n := &graphNames{ids: make(map[*graph.Edge]string, len(g.Edges)), joins: joinNodes(g)}
		for _, e := range g.Edges {
			n.ids[e] = edges.EdgeID(e)
		}
		return n
	}).(*graphNames)
}

// edgeID is e's id.
func (n *graphNames) edgeID(e *graph.Edge) string {
	if id, ok := n.ids[e]; ok {
		return id
	}
	return edges.EdgeID(e) // an edge of another graph
}
