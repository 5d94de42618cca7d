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

// hopSession starts session id of the graph a -> b (a queue edge, two
// diamonds) as edit makes it, and returns its run and a wait for n
// firings of b.
func hopSession(t *testing.T, ctx context.Context, id string, edit func(*session.Config)) (*run, func(n int)) {
	t.Helper()
	r := newRun(t)
	cfg := r.config(r.load(`digraph q { kind="session"; stall_after=0
		a [shape=diamond]; b [shape=diamond]
		a -> b [delivery=queue]
	}`))
	cfg.ID, cfg.LogsDir = id, ""
	edit(&cfg)
	fired := make(chan struct{}, 1024)
	cfg.Observer = func(ev *pb.Event) {
		if ev.Kind == "node.completed" && ev.Node == "b" {
			fired <- struct{}{}
		}
	}
	s, err := session.Start(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	return r, func(n int) {
		t.Helper()
		for i := range n {
			select {
			case <-fired:
			case <-ctx.Done():
				t.Fatalf("b fired %d times of %d", i, n)
			}
		}
	}
}

// TestInternalHopsStayOutOfTheWorkStream: in a durable session an envelope
// a firing produces for a node of the session is handed to that node in
// process once the firing's record is stored, not stored in the work
// stream (which keeps outside input only): after n outside envelopes went
// through a -> b, the stream stored n messages, not 2n, and b consumed
// each of a's outputs once.
func TestInternalHopsStayOutOfTheWorkStream(t *testing.T) {
	const n = 20
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, fired := hopSession(t, ctx, "hop", func(c *session.Config) { c.Durable = true })
	js := r.broker.JetStream()
	for i := range n {
		_, err := js.Publish(ctx, "sy.hop.node.a.in", []byte(`{"kind":"handoff"}`), jetstream.WithMsgID("ev"+strconv.Itoa(i)))
		require.NoError(t, err)
	}
	fired(n)
	st, err := js.Stream(ctx, broker.StreamName("hop"))
	require.NoError(t, err)
	info, err := st.Info(ctx)
	require.NoError(t, err)
	require.EqualValues(t, n, info.State.LastSeq, "the work stream stored the outside envelopes only")
}

// TestInternalHopsStayOffTheBus: in a session that is not durable, an
// envelope a firing produces for a node of the session is handed to that
// node's actor in process: a client watching the session's edges sees
// none of the n hops a -> b, while b fires once for each outside envelope.
// With Config.BusHops it sees every one of them.
func TestInternalHopsStayOffTheBus(t *testing.T) {
	for _, busHops := range []bool{false, true} {
		t.Run("BusHops="+strconv.FormatBool(busHops), func(t *testing.T) {
			const n = 20
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			r, fired := hopSession(t, ctx, "hopbus", func(c *session.Config) { c.BusHops = busHops })
			tap, err := r.broker.NewConn()
			require.NoError(t, err)
			defer tap.Close()
			edges, err := tap.SubscribeSync(broker.Edge("hopbus", ">"))
			require.NoError(t, err)
			require.NoError(t, tap.Flush())
			for i := range n {
				require.NoError(t, tap.Publish(broker.NodeIn("hopbus", "a"), []byte(`{"kind":"handoff","id":"ev`+strconv.Itoa(i)+`"}`)))
			}
			fired(n)
			// Whatever the server routed to the tap before b fired has
			// reached it once the flush returns.
			require.NoError(t, tap.Flush())
			msgs, _, err := edges.Pending()
			require.NoError(t, err)
			if busHops {
				require.Equal(t, n, msgs, "every hop on the bus")
			} else {
				require.Zero(t, msgs, "hops between the session's nodes went over the bus")
			}
		})
	}
}

// TestPipelineStaysOffTheBus: a pipeline that is not durable puts nothing
// on its inboxes and edges — its input is handed to the start node in
// process, and so is every hop after it — while every node runs; with
// Config.BusHops the input and the hops are on the bus.
func TestPipelineStaysOffTheBus(t *testing.T) {
	for _, busHops := range []bool{false, true} {
		t.Run("BusHops="+strconv.FormatBool(busHops), func(t *testing.T) {
			r := newRun(t)
			cfg := r.config(r.load(`digraph p { start [shape=Mdiamond]; exit [shape=Msquare]
				a [shape=box, prompt="a"]; b [shape=box, prompt="b"]
				start -> a -> b -> exit }`))
			id := "busp" + strconv.FormatBool(busHops)
			cfg.ID, cfg.BusHops = id, busHops
			tap, err := r.broker.NewConn()
			require.NoError(t, err)
			defer tap.Close()
			inboxes, err := tap.SubscribeSync(broker.NodeIn(id, "*"))
			require.NoError(t, err)
			edges, err := tap.SubscribeSync(broker.Edge(id, ">"))
			require.NoError(t, err)
			require.NoError(t, tap.Flush())

			rep := r.runConfig(cfg)
			require.Equal(t, "success", rep.Status, rep.Reason)
			require.Len(t, rep.Nodes, 4, "every node ran")
			require.NoError(t, tap.Flush())
			in, _, err := inboxes.Pending()
			require.NoError(t, err)
			hops, _, err := edges.Pending()
			require.NoError(t, err)
			if busHops {
				require.Equal(t, 1, in, "the input on the start node's inbox")
				require.Equal(t, 3, hops, "every hop on its edge")
			} else {
				require.Zero(t, in+hops, "the pipeline put envelopes on the bus")
			}
		})
	}
}
