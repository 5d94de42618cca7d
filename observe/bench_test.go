package observe_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/observe"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

// The cost of instrumentation on a pipeline hop (session's
// BenchmarkPipelineHop is the same without): two nodes bounce a token b.N
// times, with metrics, then with metrics and spans (an in-memory exporter).
func BenchmarkHopPlain(b *testing.B)   { benchHop(b, nil) }
func BenchmarkHopMetrics(b *testing.B) { benchHop(b, observe.New(observe.Options{})) }
func BenchmarkHopTraced(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewNoopExporter()))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	benchHop(b, observe.New(observe.Options{Tracer: tp}))
}

func benchHop(b *testing.B, tel *observe.Telemetry) {
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
	_ = reg.Register(nodes.Info{Type: "bench.step", Handler: nodes.HandlerFunc(func(_ context.Context, in *nodes.Input) (*nodes.Outcome, error) {
		if hops.Add(1) >= target && in.Node.ID == "b" {
			return &nodes.Outcome{Status: nodes.StatusFail, FailureReason: "done"}, nil
		}
		return &nodes.Outcome{Status: nodes.StatusSuccess, Response: "the response of the node"}, nil
	})})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cfg := session.Config{ID: session.NewID(), Graph: g, Broker: br, Registry: reg}
	if tel != nil {
		tel.Instrument(&cfg)
	}
	b.ResetTimer()
	s, err := session.Start(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	rep, err := s.Wait(ctx)
	b.StopTimer()
	if err != nil || rep.Status != "success" {
		b.Fatalf("run: %v %+v", err, rep)
	}
}

// The hooks alone, per hop: the events a pipeline hop emits through the
// observer, and one handler attempt through the middleware.
func BenchmarkHooksPerHop(b *testing.B) {
	for _, traced := range []bool{false, true} {
		b.Run(fmt.Sprintf("traced=%v", traced), func(b *testing.B) {
			opts := observe.Options{}
			if traced {
				tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewNoopExporter()))
				defer func() { _ = tp.Shutdown(context.Background()) }()
				opts.Tracer = tp
			}
			tel := observe.New(opts)
			g, _ := graph.Load("b.dot", []byte(`digraph b { a [prompt="x"] }`))
			cfg := session.Config{ID: "s1"}
			tel.Instrument(&cfg)
			h := cfg.Middleware[0](nodes.HandlerFunc(func(context.Context, *nodes.Input) (*nodes.Outcome, error) {
				return &nodes.Outcome{Status: nodes.StatusSuccess}, nil
			}))
			in := &nodes.Input{SessionID: "s1", Graph: g, Node: g.Node("a"), Type: "codergen", Attempt: 1}
			started := &pb.Event{Kind: "node.started", Node: "a", Attrs: []*pb.KV{{Key: "firing", Value: "1"}}}
			completed := &pb.Event{Kind: "node.completed", Node: "a", Status: "success", DurationMs: 1}
			selected := &pb.Event{Kind: "edge.selected", Node: "a"}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				in.AttemptID = "s1/a/" + strconv.Itoa(i+1) + "/1"
				started.Attrs[0].Value = strconv.Itoa(i + 1)
				cfg.Observer(started)
				_, _ = h.Handle(ctx, in)
				cfg.Observer(completed)
				cfg.Observer(selected)
			}
		})
	}
}
