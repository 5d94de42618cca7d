package session_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/internal/brokertest"
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
	r := newRun(t, shortWindow)
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
	// earlier ones, then the stream keeps the held envelope and what came
	// within the duplicate window (100 ms here) before the last input:
	// the first n inputs go.
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
		if purged(ctx, t, st, n+1) { // the held one is 1, the inputs 2 to n+1
			break
		}
		require.True(t, time.Now().Before(deadline), "the work stream still holds the first inputs")
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

// TestTrimKeepsDuplicateWindow: what a session consumed stays in its work
// stream for the stream's duplicate window, so that a client retrying a
// publish after the server restarted — its acknowledgement lost with the
// outage — has the envelope dropped as a duplicate, not stored and fired
// again: the server rebuilds its duplicate window at a restart from the
// messages the stream holds. Once the window has passed, a trim purges
// them.
func TestTrimKeepsDuplicateWindow(t *testing.T) {
	const n = 50
	data := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	src := `digraph q { kind="session"; stall_after=0
		src [prompt="never fires"]
		work [shape=diamond]
		src -> work [delivery=queue]
	}`
	fired := make(chan string, 2*n+1)
	start := func(window time.Duration) (*run, session.Config) {
		r := &run{t: t, broker: brokertest.Start(t, brokertest.Configure(func(c *broker.Config) {
			c.DataDir, c.DuplicateWindow = data, window
		}))}
		cfg := r.config(r.load(src))
		cfg.ID, cfg.Durable, cfg.LogsDir = "dw", true, ""
		cfg.Observer = func(ev *pb.Event) {
			if ev.Kind == "node.completed" && ev.Node == "work" {
				fired <- ev.Node
			}
		}
		return r, cfg
	}
	publish := func(js jetstream.JetStream, id string) *jetstream.PubAck {
		t.Helper()
		ack, err := js.Publish(ctx, "sy.dw.edge.src.work", []byte(`{"kind":"handoff","payload":{"message":"`+id+`"}}`), jetstream.WithMsgID(id))
		require.NoError(t, err)
		return ack
	}
	wait := func(id string) {
		t.Helper()
		select {
		case <-fired:
		case <-ctx.Done():
			t.Fatalf("work did not fire for %s", id)
		}
	}

	// First process: n envelopes fire and are trimmed as far as may be.
	r1, cfg := start(0)
	s1, err := session.Start(ctx, cfg)
	require.NoError(t, err)
	js := r1.broker.JetStream()
	for i := range n {
		publish(js, "ev"+strconv.Itoa(i))
		wait("ev" + strconv.Itoa(i))
	}
	require.NoError(t, session.TrimWork(s1))
	st, err := js.Stream(ctx, broker.StreamName("dw"))
	require.NoError(t, err)
	require.EqualValues(t, n, st.CachedInfo().State.Msgs, "consumed, but within the duplicate window: kept")
	s1.Stop()
	require.NoError(t, r1.broker.Close())

	// Second process, the same store: the client sends every envelope
	// again. Each is a duplicate; only a new one fires.
	r2, cfg := start(0)
	s2, err := session.Resume(ctx, cfg)
	require.NoError(t, err)
	js = r2.broker.JetStream()
	for i := range n {
		require.True(t, publish(js, "ev"+strconv.Itoa(i)).Duplicate, "ev%d stored again after the restart", i)
	}
	publish(js, "new")
	wait("new")
	s2.Stop()
	cp, err := session.LoadCheckpoint(ctx, r2.broker, "dw", 0)
	require.NoError(t, err)
	require.Equal(t, n+1, cp.NodeVisits["work"], "each envelope fired once")
	require.NoError(t, r2.broker.Close())

	// A third, with a window of 100 ms: once it has passed, a trim purges
	// what was consumed before it (a later envelope counts the time).
	r3, cfg := start(broker.MinDuplicateWindow)
	s3, err := session.Resume(ctx, cfg)
	require.NoError(t, err)
	defer s3.Stop()
	js = r3.broker.JetStream()
	st, err = js.Stream(ctx, broker.StreamName("dw"))
	require.NoError(t, err)
	require.Equal(t, broker.MinDuplicateWindow, st.CachedInfo().Config.Duplicates, "the stream takes the store's window")
	for i := 0; ; i++ {
		id := "later" + strconv.Itoa(i)
		publish(js, id)
		wait(id)
		require.NoError(t, session.TrimWork(s3))
		info, err := st.Info(ctx)
		require.NoError(t, err)
		if info.State.FirstSeq > uint64(n+1) {
			break // ev0..ev49 and new purged
		}
		require.NoError(t, ctx.Err(), "the work stream still holds %d messages from %d", info.State.Msgs, info.State.FirstSeq)
	}
}

// purged reports whether the stream no longer holds its message seq (a
// trim purges from the lowest sequence up).
func purged(ctx context.Context, t *testing.T, st jetstream.Stream, seq uint64) bool {
	t.Helper()
	_, err := st.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return true
	}
	require.NoError(t, err)
	return false
}
