package actors

import (
	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/edges"
	"github.com/switchyard/switchyard/graph"
)

// graphNames is what a System reads of its graph that no session changes:
// each edge's id (edges.EdgeID) and the fan-in node of each parallel node.
// It is made once per graph (graph.Graph.Derive) and shared read-only by
// the sessions that run it: every Run of one graph made the edges' ids
// three times over, at its start.
type graphNames struct {
	ids   []string            // g.Edges[i]'s id
	index map[*graph.Edge]int // an edge's place in g.Edges
	joins map[string]string   // joinNodes
}

type namesKey struct{}

// namesOf is g's graphNames.
func namesOf(g *graph.Graph) *graphNames {
	return g.Derive(namesKey{}, func(g *graph.Graph) any {
		n := &graphNames{ids: make([]string, len(g.Edges)), index: make(map[*graph.Edge]int, len(g.Edges)), joins: joinNodes(g)}
		for i, e := range g.Edges {
			n.ids[i], n.index[e] = edges.EdgeID(e), i
		}
		return n
	}).(*graphNames)
}

// edgeID is e's id.
func (n *graphNames) edgeID(e *graph.Edge) string {
	if i, ok := n.index[e]; ok {
		return n.ids[i]
	}
	return edges.EdgeID(e) // an edge of another graph
}

// sessionSubjects are the subjects a session's nodes receive on, made once
// at its start for its topology and its routes (each made them again):
// inboxes in the order of the graph's nodes, edges in the order of its
// edges. Not kept once the session started.
type sessionSubjects struct {
	names *graphNames
	inbox []string
	edge  []string
}

// subjectsOf makes the subjects of session's nodes in g.
func subjectsOf(session string, g *graph.Graph) *sessionSubjects {
	names := namesOf(g)
	sj := &sessionSubjects{names: names, inbox: make([]string, len(g.Nodes)), edge: make([]string, len(g.Edges))}
	for i, n := range g.Nodes {
		sj.inbox[i] = broker.NodeIn(session, n.ID)
	}
	for i, id := range names.ids {
		sj.edge[i] = broker.Edge(session, id)
	}
	return sj
}

// nodeIn is the inbox subject of node, the i-th of the graph's nodes (i
// < 0: its place is not known).
func (sj *sessionSubjects) nodeIn(session, node string, i int) string {
	if i >= 0 && i < len(sj.inbox) {
		return sj.inbox[i]
	}
	return broker.NodeIn(session, node)
}

// edgeSubject is e's id and subject.
func (sj *sessionSubjects) edgeSubject(session string, e *graph.Edge) (id, subject string) {
	i, ok := sj.names.index[e]
	switch {
	case !ok:
		id = edges.EdgeID(e) // an edge of another graph
	case i < len(sj.edge):
		return sj.names.ids[i], sj.edge[i]
	default:
		id = sj.names.ids[i]
	}
	return id, broker.Edge(session, id)
}

// set is every subject, as topology.subjects.
func (sj *sessionSubjects) set() map[string]bool {
	m := make(map[string]bool, len(sj.inbox)+len(sj.edge))
	for _, subj := range sj.inbox {
		m[subj] = true
	}
	for _, subj := range sj.edge {
		m[subj] = true
	}
	return m
}
