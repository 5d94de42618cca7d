package session_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

// TestTrimKeepsHeldWork: the work stream is trimmed of what the nodes
// consumed also while an envelope held by a join keeps the session
// consumer's acknowledgement floor below everything else — and the held
// envelope stays, and fires the join once its partner arrives.
func TestTrimKeepsHeldWork(t *testing.T) {
	const n = 200
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := newRun(t)
	cfg := r.config(r.load(`digraph q { kind="session"; stall_after=0
		src [prompt="never fires"]; a [prompt="never fires"]; b [prompt="never fires"]
		work [shape=diamond]
		join [shape=diamond, trigger=all]
		src -> work [delivery=queue]
		a -> join; b -> join
	}`))
	cfg.ID, cfg.Durable, cfg.LogsDir = "trim", true, ""
	fired := make(chan string, n+1)
	cfg.Observer = func(ev *pb.Event) {
		if ev.Kind == "node.completed" {
			fired <- ev.Node
		}
	}
	s, err := session.Start(ctx, cfg)
	require.NoError(t, err)
	defer s.Stop()
	js := r.broker.JetStream()
	publish := func(subj, id string) {
		t.Helper()
		_, err := js.Publish(ctx, subj, []byte(`{"kind":"handoff"}`), jetstream.WithMsgID(id))
		require.NoError(t, err)
	}
	publish("sy.trim.edge.a.join", "held")
	for i := range n {
		publish("sy.trim.edge.src.work", "ev"+strconv.Itoa(i))
	}
	for i := range n {
		select {
		case node := <-fired:
			require.Equal(t, "work", node)
		case <-ctx.Done():
			t.Fatalf("%d firings of %d", i, n)
		}
	}
	// A node's floor is recorded with its firings (the one before each),
	// and its inputs are acknowledged once their records are stored: one
	// more input at a time until the last firing's floor is above all the
	// earlier ones, then the stream keeps the held envelope and the work
	// node's last two inputs.
	st, err := js.Stream(ctx, broker.StreamName("trim"))
	require.NoError(t, err)
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		publish("sy.trim.edge.src.work", "more"+strconv.Itoa(i))
		select {
		case node := <-fired:
			require.Equal(t, "work", node)
		case <-ctx.Done():
			t.Fatal("the work node did not fire")
		}
		require.NoError(t, session.TrimWork(s))
		info, err := st.Info(ctx)
		require.NoError(t, err)
		if info.State.Msgs <= 3 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the work stream still holds %d messages", info.State.Msgs)
	}
	_, err = st.GetLastMsgForSubject(ctx, "sy.trim.edge.a.join")
	require.NoError(t, err, "the held envelope stays")

	publish("sy.trim.edge.b.join", "partner")
	select {
	case node := <-fired:
		require.Equal(t, "join", node)
	case <-ctx.Done():
		t.Fatal("the join did not fire")
	}
}
