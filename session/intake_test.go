package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/actors"
	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/nodes"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

// chainGraph is a session graph of n nodes n0 -> n1 -> ... plus extra
// statements: 2n-1 inbound subjects.
func chainGraph(n int, extra string) string {
	var b strings.Builder
	b.WriteString(`digraph s { kind="session"; `)
	for i := range n {
		fmt.Fprintf(&b, "n%d [prompt=\"p\"]; ", i)
	}
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, "n%d -> n%d; ", i-1, i)
	}
	b.WriteString(extra + "}")
	return b.String()
}

// streamSubjects are the subjects of session id's work stream.
func streamSubjects(t *testing.T, js jetstream.JetStream, id string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, broker.StreamName(id))
	require.NoError(t, err)
	return st.CachedInfo().Config.Subjects
}

// TestLargeGraphIngress: a durable session with more inbound subjects than
// a work stream lists (600 nodes: 1,199 inboxes and edges) stores its own
// subjects, and takes outside input through the session: a request or a
// JetStream publish on an inbox or edge it does not have gets the refusal
// (the reason, an envelope.rejected event, the dead letter), one on an
// inbox or edge it has gets the stream's acknowledgement and fires the
// node once — also when the publish is repeated with the same message id.
// While no process serves the session nothing answers; after a resume the
// session takes input again, and delivers what a store of an earlier
// version (every inbox and edge stored directly) held.
func TestLargeGraphIngress(t *testing.T) {
	var cfg session.Config
	sv := serveSession(t, chainGraph(600, ""), func(c *session.Config) {
		c.Durable = true
		cfg = *c
	})
	id := sv.s.ID()
	js0 := sv.broker.JetStream()
	require.Equal(t, []string{broker.AllStored(id)}, streamSubjects(t, js0, id))
	nc, err := sv.broker.NewConn()
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	dlq, err := nc.SubscribeSync(broker.DeadLetter(id))
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	for _, tc := range []struct{ name, subject, reason string }{
		{"unknown inbox", broker.NodeIn(id, "ghost"), "no node ghost in session " + id + " (its nodes: n0, n1, n10, n100, "},
		{"unknown edge", broker.Edge(id, "n1.n0"), "no edge n1:n0 in session " + id + " (its edges: n0:n1, "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"payload":{"message":"boo ` + tc.name + `"}}`
			reply, err := nc.Request(tc.subject, []byte(body), 20*time.Second)
			require.NoError(t, err)
			var r actors.Refusal
			require.NoError(t, json.Unmarshal(reply.Data, &r), "%s", reply.Data)
			require.False(t, r.OK)
			require.Contains(t, r.Error.Description, tc.reason)
			require.Contains(t, r.Error.Description, "more)", "a refusal names some ids, not 600")
			require.Contains(t, sv.wait("envelope.rejected", "").Message, tc.reason)
			dead, err := dlq.NextMsg(20 * time.Second)
			require.NoError(t, err)
			require.Equal(t, body, string(dead.Data))
			require.Equal(t, tc.subject, dead.Header.Get("Switchyard-Subject"))

			_, err = js.Publish(ctx, tc.subject, []byte(body))
			var apiErr *jetstream.APIError
			require.True(t, errors.As(err, &apiErr), "%v", err)
			require.Contains(t, apiErr.Description, tc.reason)
			sv.wait("envelope.rejected", "")
			_, err = dlq.NextMsg(20 * time.Second)
			require.NoError(t, err)
		})
	}

	// An envelope the session would refuse on delivery is refused before
	// it is stored: its publisher hears why.
	bad := `{"payload":{"message":"x","artifacts":[{"name":"p","ref":"file:///etc/passwd"}]}}`
	_, err = js.Publish(ctx, broker.NodeIn(id, "n5"), []byte(bad))
	var apiErr *jetstream.APIError
	require.True(t, errors.As(err, &apiErr), "%v", err)
	require.Contains(t, apiErr.Description, "is not in this session's object store")
	sv.wait("envelope.rejected", "")
	_, err = dlq.NextMsg(20 * time.Second)
	require.NoError(t, err)

	// A JetStream publish on an inbox: the stream's acknowledgement, the
	// envelope stored under the inbox's Stored subject; the same message
	// id again is acknowledged as a duplicate and stored once.
	last := broker.NodeIn(id, "n599")
	ack, err := js.Publish(ctx, last, []byte(`{"payload":{"message":"once"}}`), jetstream.WithMsgID("once-1"))
	require.NoError(t, err)
	require.Equal(t, broker.StreamName(id), ack.Stream)
	require.False(t, ack.Duplicate)
	sv.wait("node.completed", "n599")
	again, err := js.Publish(ctx, last, []byte(`{"payload":{"message":"once"}}`), jetstream.WithMsgID("once-1"))
	require.NoError(t, err)
	require.True(t, again.Duplicate)
	require.Equal(t, ack.Sequence, again.Sequence)
	st, err := js.Stream(ctx, broker.StreamName(id))
	require.NoError(t, err)
	stored, err := st.GetMsg(ctx, ack.Sequence)
	if err == nil { // (consumed envelopes are trimmed)
		require.Equal(t, broker.Stored(last), stored.Subject)
	}

	// A plain request on an edge gets the acknowledgement as its reply;
	// it fires the node after the first envelope, and the duplicate never
	// did.
	reply, err := nc.Request(broker.Edge(id, "n598.n599"), []byte(`{"payload":{"message":"on the edge"}}`), 20*time.Second)
	require.NoError(t, err)
	var pa struct {
		Stream string `json:"stream"`
		Seq    uint64 `json:"seq"`
	}
	require.NoError(t, json.Unmarshal(reply.Data, &pa), "%s", reply.Data)
	require.Equal(t, broker.StreamName(id), pa.Stream, "%s", reply.Data)
	require.Greater(t, pa.Seq, ack.Sequence)
	ev := sv.wait("node.completed", "n599")
	require.Equal(t, 2, sv.count("node.completed", "n599"), "%v", ev)
	_, err = dlq.NextMsg(100 * time.Millisecond)
	require.ErrorIs(t, err, nats.ErrTimeout, "nothing valid was refused")

	// Nobody serves the session: nothing answers, nothing is stored.
	sv.s.Stop()
	short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	_, err = js.Publish(short, last, []byte(`{"payload":{"message":"away"}}`), jetstream.WithRetryAttempts(0))
	cancelShort()
	require.ErrorIs(t, err, jetstream.ErrNoStreamResponse)

	// A store of an earlier version stored every inbox and edge: what it
	// holds is delivered after the resume, which gives the stream the
	// session's own subjects.
	_, err = broker.SetInbound(ctx, js0, id, nil, nil)
	require.NoError(t, err)
	_, err = js.Publish(ctx, last, []byte(`{"payload":{"message":"stored directly"}}`), jetstream.WithMsgID("old-1"))
	require.NoError(t, err)
	g, diags := graph.Load("large.dot", []byte(chainGraph(600, "")), graph.AsSession())
	require.False(t, diags.HasErrors(), "%v", diags)
	cfg.ID, cfg.Graph = id, g
	s, err := session.Resume(ctx, cfg)
	require.NoError(t, err)
	defer s.Stop()
	require.Equal(t, []string{broker.AllStored(id)}, streamSubjects(t, js0, id))
	sv.wait("node.completed", "n599")
	// Resumed, it takes input again.
	_, err = js.Publish(ctx, last, []byte(`{"payload":{"message":"back"}}`), jetstream.WithMsgID("back-1"))
	require.NoError(t, err)
	sv.wait("node.completed", "n599")
	require.Contains(t, refusal(t, nc, broker.NodeIn(id, "ghost")), "no node ghost in session "+id)

	// A reply subject that is not a reply inbox gets no acknowledgement
	// from the session's stream (the envelope is stored all the same).
	elsewhere, err := nc.SubscribeSync("elsewhere.acks")
	require.NoError(t, err)
	m := nats.NewMsg(last)
	m.Reply, m.Data = "elsewhere.acks", []byte(`{"payload":{"message":"acks elsewhere"}}`)
	require.NoError(t, nc.PublishMsg(m))
	_, err = js.Publish(ctx, last, []byte(`{"payload":{"message":"after"}}`))
	require.NoError(t, err) // after the first: its acknowledgement would be here by now
	_, err = elsewhere.NextMsg(100 * time.Millisecond)
	require.ErrorIs(t, err, nats.ErrTimeout)
}

// TestIngressAcrossLiveEdits: live edits that take a durable session past
// the bound of a listed work stream and back change how outside input is
// stored; envelopes stored before a change and not yet consumed are
// delivered after it, and the subject of each mode takes input.
func TestIngressAcrossLiveEdits(t *testing.T) {
	started, release, texts := make(chan struct{}, 16), make(chan struct{}), make(chan string, 16)
	block := nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
		for _, m := range in.Messages {
			texts <- m.Text
		}
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return &nodes.Outcome{Status: nodes.StatusSuccess}, nil
	})
	const x = `x [type="block"]; `
	small := `digraph s { kind="session"; ` + x + `}`
	sv := serveSession(t, small, func(c *session.Config) {
		c.Durable = true
		c.Handlers = map[string]nodes.Handler{"block": block}
	})
	id := sv.s.ID()
	js0 := sv.broker.JetStream()
	require.Equal(t, []string{broker.NodeIn(id, "x")}, streamSubjects(t, js0, id))
	nc, err := sv.broker.NewConn()
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pub := func(text string) {
		t.Helper()
		ack, err := js.Publish(ctx, broker.NodeIn(id, "x"), []byte(`{"payload":{"message":"`+text+`"}}`), jetstream.WithMsgID(text))
		require.NoError(t, err)
		require.Equal(t, broker.StreamName(id), ack.Stream)
	}
	edit := func(name, src string) {
		t.Helper()
		_, diags, err := sv.s.Edit(name, []byte(src))
		require.NoError(t, err, "%v", diags)
	}

	// Two envelopes stored on the inbox itself: x runs the first, the
	// second waits.
	pub("one")
	pub("two")
	<-started
	edit("large.dot", chainGraph(600, x))
	require.Equal(t, []string{broker.AllStored(id)}, streamSubjects(t, js0, id))
	pub("three") // through the session, under the Stored subject
	// Back under the bound, while "three" (stored under the Stored
	// subject) is not consumed yet.
	edit("small.dot", small)
	require.Equal(t, []string{broker.NodeIn(id, "x")}, streamSubjects(t, js0, id))
	pub("four")
	close(release)
	// Each reaches x, once (several may fire x together).
	var got []string
	timeout := time.After(30 * time.Second)
	for len(got) < 4 {
		select {
		case text := <-texts:
			got = append(got, text)
		case <-timeout:
			t.Fatalf("x got %v", got)
		}
	}
	require.ElementsMatch(t, []string{"one", "two", "three", "four"}, got)
	require.Contains(t, refusal(t, nc, broker.NodeIn(id, "n1")), "no node n1 in session "+id)
}

// TestLargeGraphIngressCluster: on a three-server cluster, a durable
// session of 600 nodes with three replicas stores its own subjects; the
// session refuses a request on an inbox it does not have, and a JetStream
// publish on one it has is acknowledged by the replicated stream and
// fires the node.
func TestLargeGraphIngressCluster(t *testing.T) {
	ctx, _, b := onCluster(t, 2*time.Minute)
	r := &run{t: t, broker: b}
	g, diags := graph.Load("large.dot", []byte(chainGraph(600, "")), graph.AsSession())
	require.False(t, diags.HasErrors(), "%v", diags)
	cfg := r.config(g)
	completed := make(chan string, 16)
	cfg.Observer = func(ev *pb.Event) {
		if ev.Kind == "node.completed" {
			completed <- ev.Node
		}
	}
	cfg.ID, cfg.Durable, cfg.LogsDir, cfg.Replicas = "big3", true, "", 3
	s, err := session.Start(ctx, cfg)
	require.NoError(t, err)
	defer s.Stop()
	st, err := b.JetStream().Stream(ctx, broker.StreamName("big3"))
	require.NoError(t, err)
	require.Equal(t, 3, st.CachedInfo().Config.Replicas)
	require.Equal(t, []string{broker.AllStored("big3")}, st.CachedInfo().Config.Subjects)

	nc, err := b.NewConn()
	require.NoError(t, err)
	defer nc.Close()
	require.Contains(t, refusal(t, nc, broker.NodeIn("big3", "ghost")), "no node ghost in session big3")
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ack, err := js.Publish(ctx, broker.NodeIn("big3", "n599"), []byte(`{"payload":{"message":"to n599"}}`), jetstream.WithMsgID("c-1"))
	require.NoError(t, err)
	require.Equal(t, broker.StreamName("big3"), ack.Stream)
	select {
	case n := <-completed:
		require.Equal(t, "n599", n)
	case <-ctx.Done():
		t.Fatal("n599 never completed")
	}
}
