package session_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
)

// TestObserverWants: an event that neither the Observer (ObserverWants),
// the session's report nor a NATS subscriber of its subject wants is not
// made; one a subscriber wants is published and observed as before, and
// the report is whole.
func TestObserverWants(t *testing.T) {
	src := `digraph p { start [shape=Mdiamond]; exit [shape=Msquare]; a; b
		start -> a -> b -> exit }`

	t.Run("all by default", func(t *testing.T) {
		r := newRun(t)
		rep := r.runConfig(r.config(r.load(src)))
		require.Equal(t, "success", rep.Status)
		k := r.kinds()
		require.Equal(t, 4, k["node.started"])
		require.Equal(t, 3, k["edge.selected"])
	})

	t.Run("only what someone wants", func(t *testing.T) {
		r := newRun(t)
		sub, err := r.broker.Conn().SubscribeSync(broker.Event("*", "edge.selected"))
		require.NoError(t, err)
		defer func() { _ = sub.Unsubscribe() }()
		require.NoError(t, r.broker.Conn().Flush())

		cfg := r.config(r.load(src))
		cfg.ObserverWants = func(kind string) bool { return kind == "session.started" }
		rep := r.runConfig(cfg)
		require.Equal(t, "success", rep.Status)
		require.Len(t, rep.Nodes, 4, "the report sees every node.completed")

		k := r.kinds()
		require.Zero(t, k["node.started"], "nobody wants node.started")
		require.Equal(t, 4, k["node.completed"])
		require.Equal(t, 1, k["session.started"])
		require.Equal(t, 1, k["session.completed"])
		require.Equal(t, 3, k["edge.selected"], "a NATS subscriber wants edge.selected")
		for i := 0; i < 3; i++ {
			_, err := sub.NextMsg(10 * time.Second)
			require.NoError(t, err, "edge.selected %d on NATS", i+1)
		}
	})
}
