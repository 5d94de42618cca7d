package session_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/nodes"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

// benchEnvelope is an envelope of about 430 bytes, like a pipeline hop's.
func benchEnvelope() *pb.Envelope {
	ctx := []*pb.KV{}
	for i := 0; i < 8; i++ {
		ctx = append(ctx, &pb.KV{Key: fmt.Sprintf("context.key%d", i), Value: "a value of some length"})
	}
	return &pb.Envelope{Id: "s1.a.1.a.b", SessionId: "s1", Kind: "handoff", FromNode: "a", ToNode: "b", EdgeId: "a.b",
		Iteration: 1, CreatedAt: timestamppb.Now(), Payload: &pb.Payload{Message: "the response of the previous node, a sentence or two long"},
		Outcome: &pb.Outcome{Status: "success"}, Context: ctx}
}

// BenchmarkRawNATSHop is the baseline: a subscriber decodes the envelope,
// re-encodes it and publishes it on for the next hop.
func BenchmarkRawNATSHop(b *testing.B) {
	br := brokertest.Start(b)
	nc := br.Conn()
	data, _ := proto.Marshal(benchEnvelope())
	b.SetBytes(int64(len(data)))
	done := make(chan struct{})
	var n atomic.Int64
	target := int64(b.N)
	sub, err := nc.Subscribe("bench.hop", func(m *nats.Msg) {
		env := &pb.Envelope{}
		if err := proto.Unmarshal(m.Data, env); err != nil {
			panic(err)
		}
		env.Iteration++
		out, _ := proto.Marshal(env)
		if n.Add(1) == target {
			close(done)
			return
		}
		_ = nc.Publish("bench.hop", out)
	})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	b.ResetTimer()
	_ = nc.Publish("bench.hop", data)
	<-done
}

// BenchmarkPipelineHop measures one pipeline hop on the real runtime: node
// complete → next node started, including edge selection, the checkpoint
// journal (in memory), envelope encode/decode, the NATS publish, the actor
// delivery and the events. Two nodes bounce a token b.N times.
func BenchmarkPipelineHop(b *testing.B) {
	benchPipeline(b, false, false)
}

// BenchmarkPipelineHopInline is the same with a step that declares it
// never blocks (nodes.InlineFunc): it runs on its actor's goroutine, as
// start, exit, parallel and routing diamonds do.
func BenchmarkPipelineHopInline(b *testing.B) {
	benchPipeline(b, false, true)
}

// BenchmarkPipelineHopJetStream is the same with every envelope published
// through JetStream (acknowledged, file storage).
func BenchmarkPipelineHopJetStream(b *testing.B) {
	benchPipeline(b, true, false)
}

func benchPipeline(b *testing.B, durable, inline bool) {
	br := brokertest.Start(b)
	var hops atomic.Int64
	target := int64(b.N)
	src := fmt.Sprintf(`digraph bench {
		graph [max_visits=%d, max_iterations=%d, stall_after=0]
		start [shape=Mdiamond]
		a [type="bench.step"]
		b [type="bench.step"]
		exit [shape=Msquare]
		start -> a
		a -> b
		b -> a [condition="outcome=success"]
		b -> exit [condition="outcome=fail"]
	}`, b.N+10, 2*b.N+10)
	g, diags := graph.Load("bench.dot", []byte(src), graph.WithKnownTypes(append(graph.BuiltinTypes, "bench.step")...))
	if diags.HasErrors() {
		b.Fatal(diags)
	}
	reg := nodes.NewRegistry()
	_ = nodes.RegisterBuiltins(reg, nodes.Deps{})
	step := func(_ context.Context, in *nodes.Input) (*nodes.Outcome, error) {
		if hops.Add(1) >= target && in.Node.ID == "b" {
			return &nodes.Outcome{Status: nodes.StatusFail, FailureReason: "done"}, nil
		}
		return &nodes.Outcome{Status: nodes.StatusSuccess, Response: "the response of the node, a sentence or two long"}, nil
	}
	var h nodes.Handler = nodes.HandlerFunc(step)
	if inline {
		h = nodes.InlineFunc(step)
	}
	_ = reg.Register(nodes.Info{Type: "bench.step", Handler: h})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	b.ResetTimer()
	s, err := session.Start(ctx, session.Config{Graph: g, Broker: br, Registry: reg, Durable: durable})
	if err != nil {
		b.Fatal(err)
	}
	rep, err := s.Wait(ctx)
	b.StopTimer()
	if err != nil || rep.Status != "success" {
		b.Fatalf("run: %v %+v", err, rep)
	}
	_ = broker.StreamName
}

// BenchmarkRawJetStreamHop is the floor of a durable hop: a durable
// consumer with explicit acknowledgement receives the envelope from a
// file-backed stream, decodes and re-encodes it, publishes it on through
// JetStream (waiting for the server's acknowledgement) and acknowledges
// the one it consumed — what a durable hop cannot do without.
func BenchmarkRawJetStreamHop(b *testing.B) {
	br := brokertest.Start(b)
	js := br.JetStream()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BENCH", Subjects: []string{"bench.js"}, Storage: jetstream.FileStorage})
	if err != nil {
		b.Fatal(err)
	}
	cons, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "hop", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		b.Fatal(err)
	}
	data, _ := proto.Marshal(benchEnvelope())
	b.SetBytes(int64(len(data)))
	done := make(chan struct{})
	var n atomic.Int64
	target := int64(b.N)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		env := &pb.Envelope{}
		if err := proto.Unmarshal(m.Data(), env); err != nil {
			panic(err)
		}
		env.Iteration++
		out, _ := proto.Marshal(env)
		if n.Add(1) == target {
			_ = m.Ack()
			close(done)
			return
		}
		if _, err := js.Publish(ctx, "bench.js", out); err != nil {
			panic(err)
		}
		_ = m.Ack()
	})
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Stop()
	b.ResetTimer()
	if _, err := js.Publish(ctx, "bench.js", data); err != nil {
		b.Fatal(err)
	}
	<-done
}
