package session_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
)

// TestPipelineWithTerminalsByID runs a graph written for another
// implementation: its start and exit are named by id, not by shape.
func TestPipelineWithTerminalsByID(t *testing.T) {
	r := newRun(t)
	rep := r.exec(`digraph other {
		Start [shape=circle]
		work [prompt="do the work"]
		end [shape=doublecircle]
		Start -> work -> end
	}`)
	require.Equal(t, "success", rep.Status, rep.Reason)
	require.Equal(t, []string{"Start", "work", "end"}, r.visits())
	for node, typ := range map[string]string{"Start": "start", "work": "codergen", "end": "exit"} {
		ev := r.event("node.started", node)
		require.NotNil(t, ev, node)
		var got string
		for _, kv := range ev.Attrs {
			if kv.Key == "type" {
				got = kv.Value
			}
		}
		require.Equal(t, typ, got, node)
	}
}

// TestRetryOutcomeRoutesByItsEdge: a retry outcome whose retries are spent
// follows an outcome=retry edge before the node fails.
func TestRetryOutcomeRoutesByItsEdge(t *testing.T) {
	t.Run("pipeline", func(t *testing.T) {
		r := newRun(t)
		r.mock = `{"work":[{"status":"retry","notes":"needs a fix"}]}`
		rep := r.exec(`digraph p {
			start [shape=Mdiamond]; exit [shape=Msquare]
			work [prompt="w", max_retries=1]
			fix [prompt="f"]
			start -> work
			work -> exit [condition="outcome=success"]
			work -> fix [condition="outcome=retry"]
			fix -> exit
		}`)
		require.Equal(t, "success", rep.Status, rep.Reason)
		require.Equal(t, 2, rep.Node("work").Attempts, "retried first")
		require.Equal(t, "retry", rep.Node("work").Status)
		require.NotNil(t, rep.Node("fix"), "the outcome=retry edge was followed")
	})
	t.Run("pipeline without a retry edge fails", func(t *testing.T) {
		r := newRun(t)
		r.mock = `{"work":[{"status":"retry"}]}`
		rep := r.exec(`digraph p {
			start [shape=Mdiamond]; exit [shape=Msquare]
			work [prompt="w"]
			start -> work -> exit
		}`)
		require.Equal(t, "fail", rep.Status)
		require.Contains(t, rep.Reason, "retries exhausted after 1 attempts")
	})
	t.Run("session", func(t *testing.T) {
		l := serve(t, `digraph s { kind="session"
			work [prompt="w"]; fix [prompt="f"]; done [prompt="d"]
			work -> fix [condition="outcome=retry"]
			work -> done [condition="outcome=success"] }`, `{"work":[{"status":"retry"}]}`, nil)
		l.publish(t, broker.NodeIn(l.s.ID(), "work"), "go")
		ev := l.waitEvent(t, "work completed", completedBy("work"))
		require.Equal(t, "retry", ev.Status)
		l.waitEvent(t, "fix completed", completedBy("fix"))
		require.Equal(t, 0, l.calls_("done"))
	})
}
