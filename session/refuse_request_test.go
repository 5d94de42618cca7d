package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/actors"
	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/session"
)

const refuseGraph = `digraph s { a [prompt="a"]; b [prompt="b"]; gone [prompt="g"]; a -> b; a -> gone }`

// The edit removes gone (and a -> gone) and adds c with b -> c.
const refuseEdit = `digraph s { a [prompt="a"]; b [prompt="b"]; c [prompt="c"]; a -> b; b -> c }`

// TestRequestsOnUnknownSubjectsRefused: in a session, durable or not, a
// request (nats req, a JetStream publish) on the inbox of a node the
// session does not have, on an edge it does not have, or on the inbox of a
// node a live edit removed gets an error reply naming the reason — never a
// stream's acknowledgement — and the envelope is refused visibly (an
// envelope.rejected event, a copy on sy.<session>.dlq). What the edit added
// is received, and a durable session's stream acknowledges it.
func TestRequestsOnUnknownSubjectsRefused(t *testing.T) {
	for _, durable := range []bool{false, true} {
		t.Run(fmt.Sprintf("durable=%v", durable), func(t *testing.T) {
			sv := serveSession(t, refuseGraph, func(c *session.Config) { c.Durable = durable })
			id := sv.s.ID()
			nc, err := sv.broker.NewConn()
			require.NoError(t, err)
			defer nc.Close()
			js, err := jetstream.New(nc)
			require.NoError(t, err)
			dlq, err := nc.SubscribeSync(broker.DeadLetter(id))
			require.NoError(t, err)
			require.NoError(t, nc.Flush())

			_, _, err = sv.s.Edit("v2.dot", []byte(refuseEdit))
			require.NoError(t, err)
			sv.wait("session.edited", "")

			for _, tc := range []struct{ name, subject, reason string }{
				{"unknown inbox", broker.NodeIn(id, "ghost"), "no node ghost in session " + id + " (its nodes: a, b, c)"},
				{"unknown edge", broker.Edge(id, "b.a"), "no edge b:a in session " + id + " (its edges: a:b, b:c)"},
				{"removed node", broker.NodeIn(id, "gone"), "no node gone in session " + id + " (its nodes: a, b, c)"},
				{"removed edge", broker.Edge(id, "a.gone"), "no edge a:gone in session " + id},
			} {
				t.Run(tc.name, func(t *testing.T) {
					body := `{"payload":{"message":"boo ` + tc.name + `"}}`
					reply, err := nc.Request(tc.subject, []byte(body), 20*time.Second)
					require.NoError(t, err)
					var r actors.Refusal
					require.NoError(t, json.Unmarshal(reply.Data, &r), "%s", reply.Data)
					require.False(t, r.OK)
					require.Equal(t, id, r.Session)
					require.Contains(t, r.Error.Description, tc.reason)
					ev := sv.wait("envelope.rejected", "")
					require.Contains(t, ev.Message, tc.reason)
					dead, err := dlq.NextMsg(20 * time.Second)
					require.NoError(t, err)
					require.Equal(t, body, string(dead.Data))
					require.Equal(t, tc.subject, dead.Header.Get("Switchyard-Subject"))
					require.Contains(t, dead.Header.Get("Switchyard-Reason"), tc.reason)

					// A JetStream publisher's publish fails with the reason.
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					defer cancel()
					_, err = js.Publish(ctx, tc.subject, []byte(body))
					var apiErr *jetstream.APIError
					require.True(t, errors.As(err, &apiErr), "%v", err)
					require.Contains(t, apiErr.Description, tc.reason)
					sv.wait("envelope.rejected", "")
					_, err = dlq.NextMsg(20 * time.Second)
					require.NoError(t, err)
				})
			}

			// What the edit added is received.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if durable {
				ack, err := js.Publish(ctx, broker.NodeIn(id, "c"), []byte(`{"payload":{"message":"to c"}}`))
				require.NoError(t, err)
				require.Equal(t, broker.StreamName(id), ack.Stream)
			} else {
				require.NoError(t, nc.Publish(broker.NodeIn(id, "c"), []byte(`{"payload":{"message":"to c"}}`)))
			}
			sv.wait("node.completed", "c")
			if durable {
				_, err := js.Publish(ctx, broker.Edge(id, "b.c"), []byte(`{"payload":{"message":"on b:c"}}`))
				require.NoError(t, err)
				sv.wait("node.completed", "c")
			}
			// Nothing routed on what the edit added was refused.
			require.NoError(t, ctx.Err())
			_, err = dlq.NextMsg(100 * time.Millisecond)
			require.ErrorIs(t, err, nats.ErrTimeout)
		})
	}
}

// TestWorkStreamSubjects: a durable session's work stream stores exactly
// its nodes' inboxes and incoming edges, follows live edits (what an edit
// adds, what it removes), keeps them on resume, and a failed edit leaves
// them as they were.
func TestWorkStreamSubjects(t *testing.T) {
	var cfg session.Config
	sv := serveSession(t, refuseGraph, func(c *session.Config) {
		c.Durable = true
		cfg = *c
	})
	id := sv.s.ID()
	subjects := func() []string {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		st, err := sv.broker.JetStream().Stream(ctx, broker.StreamName(id))
		require.NoError(t, err)
		return st.CachedInfo().Config.Subjects
	}
	want := func(parts ...string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, "sy."+id+"."+p)
		}
		return out
	}
	require.Equal(t, want("edge.a.b", "edge.a.gone", "node.a.in", "node.b.in", "node.gone.in"), subjects())

	_, _, err := sv.s.Edit("v2.dot", []byte(refuseEdit))
	require.NoError(t, err)
	require.Equal(t, want("edge.a.b", "edge.b.c", "node.a.in", "node.b.in", "node.c.in"), subjects())

	// An edit that fails (an edge's delivery cannot be buffered) changes
	// nothing.
	_, _, err = sv.s.Edit("v3.dot", []byte(`digraph s { a [prompt="a"]; b [prompt="b"]; c [prompt="c"]; d [prompt="d"]; a -> b; b -> c; c -> d [delivery="bogus"] }`))
	require.ErrorContains(t, err, "bogus")
	require.Equal(t, want("edge.a.b", "edge.b.c", "node.a.in", "node.b.in", "node.c.in"), subjects())

	// A resume sets them from the graph it runs, also over a stream that
	// stores every inbox and edge (a store of an earlier version).
	sv.s.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = broker.SetInbound(ctx, sv.broker.JetStream(), id, nil, nil)
	require.NoError(t, err)
	require.Equal(t, want("edge.>", "node.*.in"), subjects())
	g, diags := graph.Load("v2.dot", []byte(refuseEdit), graph.AsSession())
	require.False(t, diags.HasErrors(), "%v", diags)
	cfg.ID, cfg.Graph = id, g
	s, err := session.Resume(ctx, cfg)
	require.NoError(t, err)
	defer s.Stop()
	require.Equal(t, want("edge.a.b", "edge.b.c", "node.a.in", "node.b.in", "node.c.in"), subjects())
	nc, err := sv.broker.NewConn()
	require.NoError(t, err)
	defer nc.Close()
	require.Contains(t, refusal(t, nc, broker.NodeIn(id, "gone")), "no node gone in session "+id)
}

// TestWorkStreamSubjectsCluster: on a three-server cluster, a durable
// session with three replicas lists its subjects in its work stream, a
// live edit updates them (the replicas kept), and a request on a subject
// the edit removed gets the session's refusal.
func TestWorkStreamSubjectsCluster(t *testing.T) {
	ctx, _, b := onCluster(t, 2*time.Minute)
	r := &run{t: t, broker: b}
	g, diags := graph.Load("test.dot", []byte(refuseGraph), graph.AsSession())
	require.False(t, diags.HasErrors(), "%v", diags)
	cfg := r.config(g)
	cfg.ID, cfg.Durable, cfg.LogsDir, cfg.Replicas = "c3", true, "", 3
	s, err := session.Start(ctx, cfg)
	require.NoError(t, err)
	defer s.Stop()

	_, _, err = s.Edit("v2.dot", []byte(refuseEdit))
	require.NoError(t, err)
	st, err := b.JetStream().Stream(ctx, broker.StreamName("c3"))
	require.NoError(t, err)
	require.Equal(t, 3, st.CachedInfo().Config.Replicas)
	require.Equal(t, []string{"sy.c3.edge.a.b", "sy.c3.edge.b.c", "sy.c3.node.a.in", "sy.c3.node.b.in", "sy.c3.node.c.in"},
		st.CachedInfo().Config.Subjects)

	nc, err := b.NewConn()
	require.NoError(t, err)
	defer nc.Close()
	require.Contains(t, refusal(t, nc, broker.NodeIn("c3", "gone")), "no node gone in session c3")
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ack, err := js.Publish(ctx, broker.NodeIn("c3", "c"), []byte(`{"payload":{"message":"to c"}}`))
	require.NoError(t, err)
	require.Equal(t, broker.StreamName("c3"), ack.Stream)
}

// TestFailedEditRestoresWorkStreamSubjects: a live edit that fails after
// the work stream took its new subjects (it adds back a node still
// finishing its removal) gives the stream its subjects back: a request on
// the node's inbox is still refused.
func TestFailedEditRestoresWorkStreamSubjects(t *testing.T) {
	started, release := make(chan struct{}, 1), make(chan struct{})
	block := nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return &nodes.Outcome{Status: nodes.StatusSuccess}, nil
	})
	const v1 = `digraph s { kind="session"; m [prompt="m"]; x [type="block"] }`
	sv := serveSession(t, v1, func(c *session.Config) {
		c.Durable = true
		c.Handlers = map[string]nodes.Handler{"block": block}
	})
	defer close(release)
	id := sv.s.ID()
	sv.pub("x", "work")
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("x never started")
	}
	_, diags, err := sv.s.Edit("v2.dot", []byte(`digraph s { kind="session"; m [prompt="m"] }`))
	require.NoError(t, err, "%v", diags)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := sv.broker.JetStream().Stream(ctx, broker.StreamName(id))
	require.NoError(t, err)
	require.Equal(t, []string{"sy." + id + ".node.m.in"}, st.CachedInfo().Config.Subjects)

	_, _, err = sv.s.Edit("v3.dot", []byte(v1))
	require.ErrorContains(t, err, "still finishing")
	st, err = sv.broker.JetStream().Stream(ctx, broker.StreamName(id))
	require.NoError(t, err)
	require.Equal(t, []string{"sy." + id + ".node.m.in"}, st.CachedInfo().Config.Subjects, "as before the failed edit")
	nc, err := sv.broker.NewConn()
	require.NoError(t, err)
	defer nc.Close()
	require.Contains(t, refusal(t, nc, broker.NodeIn(id, "x")), "no node x in session "+id)
}

// refusal is the reply a request with an outside envelope on subject gets
// (the session's refusal, when it refuses it).
func refusal(t *testing.T, nc *nats.Conn, subject string) string {
	t.Helper()
	reply, err := nc.Request(subject, []byte(`{"payload":{"message":"boo"}}`), 20*time.Second)
	require.NoError(t, err)
	return string(reply.Data)
}
