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
	r := newRun(t)
	cfg := r.config(r.load(`digraph q { kind="session"; stall_after=0
		a [shape=diamond]; b [shape=diamond]
		a -> b [delivery=queue]
	}`))
	cfg.ID, cfg.Durable, cfg.LogsDir = "hop", true, ""
	fired := make(chan string, 2*n+1)
	cfg.Observer = func(ev *pb.Event) {
		if ev.Kind == "node.completed" && ev.Node == "b" {
			fired <- ev.Node
		}
	}
	s, err := session.Start(ctx, cfg)
	require.NoError(t, err)
	defer s.Stop()
	js := r.broker.JetStream()
	for i := range n {
		_, err := js.Publish(ctx, "sy.hop.node.a.in", []byte(`{"kind":"handoff"}`), jetstream.WithMsgID("ev"+strconv.Itoa(i)))
		require.NoError(t, err)
	}
	for i := range n {
		select {
		case <-fired:
		case <-ctx.Done():
			t.Fatalf("b fired %d times of %d", i, n)
		}
	}
	st, err := js.Stream(ctx, broker.StreamName("hop"))
	require.NoError(t, err)
	info, err := st.Info(ctx)
	require.NoError(t, err)
	require.EqualValues(t, n, info.State.LastSeq, "the work stream stored the outside envelopes only")
}
