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
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// TestSessionsOfAGraphShareItsNames: the edges' ids are made once per
// graph, and each session's subjects from them are those edges.EdgeID and
// broker.Edge make — the routes to the nodes and the names a firing sends
// on (edgeNames, made at an edge's first use from the graph's ids).
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
			// A live edit's spawn makes them itself.
			gotID, gotSubj = (&sessionSubjects{names: names}).edgeSubject(sid, e)
			require.Equal(t, [2]string{id, subj}, [2]string{gotID, gotSubj})
		}
		for _, n := range g.Nodes {
			require.Equal(t, broker.NodeIn(sid, n.ID), (&sessionSubjects{names: names}).nodeIn(sid, n.ID, -1))
			s.routeMu.RLock()
			r, ok := s.routes[broker.NodeIn(sid, n.ID)]
			s.routeMu.RUnlock()
			require.True(t, ok)
			require.Equal(t, n.ID, r.node)
			require.True(t, s.topo.Load().subjects[broker.NodeIn(sid, n.ID)])
		}
		s.Stop()
	}
}

// TestPublishedForOthers: a System tells whether it published something
// others read (the session's Stop waits for the server only then): an
// event nobody subscribed to is not published, one a watcher subscribed
// to is.
func TestPublishedForOthers(t *testing.T) {
	b := brokertest.Start(t, brokertest.Memory())
	g, err := graph.Parse("t.dot", []byte(`digraph t { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }`))
	require.NoError(t, err)
	reg := nodes.NewRegistry()
	require.NoError(t, nodes.RegisterBuiltins(reg, nodes.Deps{}))
	watcher, err := b.NewConn()
	require.NoError(t, err)
	defer watcher.Close()
	for _, watched := range []bool{false, true} {
		sid := "unwatched"
		if watched {
			sid = "watched"
			sub, err := watcher.SubscribeSync(broker.Event(sid, "note"))
			require.NoError(t, err)
			defer func() { _ = sub.Unsubscribe() }()
			require.NoError(t, watcher.Flush())
		}
		s, err := New(Config{SessionID: sid, Graph: g, Conn: b.Conn(), Registry: reg, Interest: b.Interest,
			Wants:   func(string) bool { return false },
			Journal: JournalFunc(func(context.Context, *Commit) error { return nil })})
		require.NoError(t, err)
		s.Emit(&pb.Event{Kind: "note"})
		s.Stop() // its events are published when it returns
		require.Equal(t, watched, s.PublishedForOthers(), "watched: %v", watched)
	}
}
