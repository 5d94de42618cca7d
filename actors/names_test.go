package actors

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/edges"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/nodes"
)

// TestSessionsOfAGraphShareItsNames: the edges' ids are made once per
// graph, and each session's subjects from them are those edges.EdgeID and
// broker.Edge make — the routes to the nodes and the names a firing sends
// on (edgeNames, filled at spawn).
func TestSessionsOfAGraphShareItsNames(t *testing.T) {
	b := brokertest.Start(t, brokertest.Memory())
	g, err := graph.Parse("t.dot", []byte(`digraph t {
		start [shape=Mdiamond]; exit [shape=Msquare]
		a [type="work"]
		start -> a; a -> a [label="again"]; a -> a [label="more"]; a -> exit
	}`))
	require.NoError(t, err)
	reg := nodes.NewRegistry()
	require.NoError(t, nodes.RegisterBuiltins(reg, nodes.Deps{}))
	require.NoError(t, reg.Register(nodes.Info{Type: "work", Handler: nodes.HandlerFunc(
		func(context.Context, *nodes.Input) (*nodes.Outcome, error) { return &nodes.Outcome{}, nil })}))
	names := namesOf(g)
	require.Same(t, names, namesOf(g), "made again for the same graph")
	for _, sid := range []string{"one", "two"} {
		s, err := New(Config{SessionID: sid, Graph: g, Conn: b.Conn(), Registry: reg,
			Journal: JournalFunc(func(context.Context, *Commit) error { return nil })})
		require.NoError(t, err)
		for _, e := range g.Edges {
			id := edges.EdgeID(e)
			require.Equal(t, id, names.edgeID(e))
			subj := broker.Edge(sid, id)
			s.routeMu.RLock()
			r, ok := s.routes[subj]
			s.routeMu.RUnlock()
			require.True(t, ok, "no route on %s", subj)
			require.Equal(t, e.To, r.node)
			gotID, gotSubj := s.edgeNames(e)
			require.Equal(t, [2]string{id, subj}, [2]string{gotID, gotSubj})
			require.True(t, s.topo.Load().subjects[subj])
		}
		s.Stop()
	}
}
