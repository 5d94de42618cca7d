package session_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/graph"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// TestLiveEditChangesDelivery: an edit that changes a kept edge's
// delivery takes effect, on what the edge holds and on what comes next.
func TestLiveEditChangesDelivery(t *testing.T) {
	l := serve(t, `digraph s { kind="session"; src [prompt="s"]; m [prompt="m", trigger=manual]; src -> m }`, "", nil)
	edge := broker.Edge(l.s.ID(), "src.m")
	l.publish(t, edge, "a")
	l.publish(t, edge, "b")
	explainUntil(t, l, "m", "held=2")
	_, diags, err := l.s.Edit("v2.dot", []byte(`digraph s { kind="session"; src [prompt="s"]; m [prompt="m", trigger=manual]; src -> m [delivery=latest] }`))
	require.NoError(t, err, "%v", diags)
	explainUntil(t, l, "m", "held=1")
	l.publish(t, edge, "c")
	l.publish(t, edge, "d")
	// held=1 was already true before c and d: wait until m has taken both
	// (c superseded b, d superseded c) so the trigger cannot overtake d.
	for _, what := range []string{"b superseded", "c superseded"} {
		l.waitEvent(t, what, func(ev *pb.Event) bool {
			return ev.Kind == "envelope.dropped" && ev.Node == "m" && strings.Contains(ev.Message, "superseded by a newer envelope")
		})
	}
	explainUntil(t, l, "m", "held=1")
	_, err = l.broker.Conn().Request(broker.Control(l.s.ID(), "trigger"), []byte(`{"node":"m"}`), 10*time.Second)
	require.NoError(t, err)
	l.waitEvent(t, "m completed", completedBy("m"))
	require.Equal(t, []string{"handoff:d"}, l.inputsOf("m"), "latest keeps the newest only")
	ev := l.waitEvent(t, "dropped", func(ev *pb.Event) bool {
		return ev.Kind == "envelope.dropped" && ev.Node == "m" && len(ev.Attrs) > 0
	})
	require.Contains(t, ev.Message, "new delivery mode")
}

// TestFailedLiveEditChangesNothing: an edit that fails half-way (an
// added edge's delivery cannot be buffered) leaves the running session as
// it was — its nodes' triggers, its graph — and a later edit applies.
func TestFailedLiveEditChangesNothing(t *testing.T) {
	l := serve(t, `digraph s { kind="session"; m [prompt="m"] }`, "", nil)
	bad, _ := graph.Load("bad.dot", []byte(`digraph s { kind="session"
		m [prompt="m", trigger=manual]; x [prompt="x"]; y [prompt="y"]
		x -> y [delivery="bogus"] }`))
	require.NotNil(t, bad)
	_, err := l.s.System().ApplyEdit(bad)
	require.Error(t, err)
	require.Contains(t, err.Error(), "bogus")
	require.Equal(t, uint64(1), l.s.Version())
	l.publish(t, broker.NodeIn(l.s.ID(), "m"), "still any")
	l.waitEvent(t, "m completed", completedBy("m"))
	require.Contains(t, l.s.System().Explain("x").Error, "no node x")
	for _, st := range l.s.System().Explain("").States {
		require.NotEqual(t, "x", st.Node, "the scheduler does not know x")
	}
	_, diags, err := l.s.Edit("good.dot", []byte(`digraph s { kind="session"; m [prompt="m"]; x [prompt="x"]; m -> x }`))
	require.NoError(t, err, "%v", diags)
	require.Equal(t, uint64(2), l.s.Version())
	l.publish(t, broker.NodeIn(l.s.ID(), "m"), "again")
	l.waitEvent(t, "x completed", completedBy("x"))
}
