package pool_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/pool"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// The owner takes the first outcome of its attempt on the job's reply
// subject: what is not an envelope, or another attempt's outcome, is refused
// (an event) and the wait goes on; the job leaves the stream once acked.
func TestDispatchOutcomes(t *testing.T) {
	b := brokertest.Start(t)
	g, err := graph.Parse("r.dot", []byte(`digraph R { start [shape=Mdiamond]; x [type=remote, pool=p, prompt="hi"]; exit [shape=Msquare]; start -> x -> exit }`))
	require.NoError(t, err)
	d := &pool.Dispatcher{NC: b.Conn(), JS: b.JetStream(), Storage: b.Storage()}
	h, err := d.Handler("p")
	require.NoError(t, err)
	_, err = d.Handler("a.b")
	require.Error(t, err, "a pool name that is no subject token")

	var mu sync.Mutex
	var refused []string
	in := &nodes.Input{SessionID: "s", Graph: g, Node: g.Node("x"), Type: "remote", Prompt: "hi",
		Attempt: 1, AttemptID: "s/x/3/1", Context: map[string]string{"k": "v"},
		Emit: func(kind string, f map[string]any) {
			if kind == "work.refused" {
				mu.Lock()
				refused = append(refused, f["message"].(string))
				mu.Unlock()
			}
		}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type result struct {
		o   *nodes.Outcome
		err error
	}
	done := make(chan result, 1)
	go func() { o, err := h.Handle(ctx, in); done <- result{o, err} }()

	// A worker: a real NATS client pulling from the pool's consumer.
	c, err := b.JetStream().Consumer(ctx, pool.Stream, pool.ConsumerName("p"))
	for err != nil { // made by the dispatcher with the job
		select {
		case <-ctx.Done():
			t.Fatal("the pool's consumer was never made")
		case <-time.After(20 * time.Millisecond):
		}
		c, err = b.JetStream().Consumer(ctx, pool.Stream, pool.ConsumerName("p"))
	}
	// A consumer just made may not answer pulls yet (no responders): pull
	// again until it does, within the test's deadline.
	m, err := c.Next()
	for errors.Is(err, nats.ErrNoResponders) {
		select {
		case <-ctx.Done():
			t.Fatal("the pool's consumer never answered a pull")
		case <-time.After(20 * time.Millisecond):
		}
		m, err = c.Next()
	}
	require.NoError(t, err)
	require.Equal(t, byte('{'), m.Data()[0], "type=remote jobs are JSON")
	job, err := pool.DecodeEnvelope(m.Data())
	require.NoError(t, err)
	require.Equal(t, "s/x/3/1", job.GetId())
	require.Equal(t, pool.KindJob, job.GetKind())
	require.Equal(t, "hi", job.GetPayload().GetMessage())
	require.Equal(t, "syw.p.s.x.3.1", m.Subject(), "one subject per attempt")
	reply := m.Headers().Get(pool.ReplyHeader)
	require.Equal(t, "syo.s.x.3.1", reply)

	nc := b.Conn()
	pub := func(env *pb.Envelope) {
		data, err := protojson.Marshal(env)
		require.NoError(t, err)
		require.NoError(t, nc.Publish(reply, data))
	}
	require.NoError(t, nc.Publish(reply, []byte("not an envelope")))
	pub(&pb.Envelope{Id: "s/x/3/2", Kind: pool.KindOutcome, Payload: &pb.Payload{Message: "another attempt"}})
	pub(&pb.Envelope{Id: job.GetId(), Kind: pool.KindOutcome, Outcome: &pb.Outcome{Status: "success", PreferredLabel: "ok"},
		Payload: &pb.Payload{Message: "done"}, ContextUpdates: []*pb.KV{{Key: "worker", Value: "test"}},
		Usage: &pb.Usage{InputTokens: 3, OutputTokens: 4}})
	pub(&pb.Envelope{Id: job.GetId(), Kind: pool.KindOutcome, Payload: &pb.Payload{Message: "late duplicate"}})
	require.NoError(t, m.DoubleAck(ctx))

	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		t.Fatal("no outcome")
	}
	require.NoError(t, r.err)
	require.Equal(t, "done", r.o.Response)
	require.Equal(t, nodes.StatusSuccess, r.o.Status)
	require.Equal(t, "ok", r.o.PreferredLabel)
	require.Equal(t, "test", r.o.ContextUpdates["worker"])
	require.EqualValues(t, 3, r.o.Usage.InputTokens)
	mu.Lock()
	require.Len(t, refused, 2, "the garbage and the other attempt's outcome: %v", refused)
	mu.Unlock()

	s, err := b.JetStream().Stream(ctx, pool.Stream)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	require.Zero(t, info.State.Msgs, "an acked job leaves the work queue")
}
