package actors

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/edges"
	"github.com/switchyard/switchyard/graph"
)

// TestEdgeNamesBounded: an edge's id and subject are made once and kept
// by the edge; the names of edges no graph has any more (a live edit's)
// are let go once the names kept pass their bound, and every edge is
// still named right after that.
func TestEdgeNamesBounded(t *testing.T) {
	g, diags := graph.Load("t.dot", []byte(`digraph g { kind=session; a; b; a -> b; a -> b }`))
	require.False(t, diags.HasErrors(), "%v", diags)
	s := &System{cfg: Config{SessionID: "s1"}}
	s.topo.Store(newTopology("s1", g))
	for _, e := range g.Edges {
		id, subj := s.edgeNames(e)
		require.Equal(t, edges.EdgeID(e), id)
		require.Equal(t, broker.Edge("s1", id), subj)
	}
	require.Len(t, s.edgeSubjects, len(g.Edges))
	id, _ := s.edgeNames(g.Edges[1])
	require.Len(t, s.edgeSubjects, len(g.Edges), "named once")
	require.Equal(t, "a.b.1", id)

	bound := maxEdgeNames + 2*len(g.Edges)
	for i := 0; i < 3*bound; i++ {
		e := *g.Edges[i%2] // an edge of an earlier graph: another pointer
		id, subj := s.edgeNames(&e)
		require.Equal(t, edges.EdgeID(&e), id)
		require.Equal(t, broker.Edge("s1", id), subj)
		require.LessOrEqual(t, len(s.edgeSubjects), bound)
	}
	id, subj := s.edgeNames(g.Edges[0])
	require.Equal(t, "a.b", id)
	require.Equal(t, broker.Edge("s1", "a.b"), subj)
}
