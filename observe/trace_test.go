package observe_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/observe"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

func tracing(t *testing.T) (*tracetest.InMemoryExporter, *sdktrace.TracerProvider) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return exp, tp
}

func spansNamed(spans tracetest.SpanStubs, name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func attr(s tracetest.SpanStub, key string) string {
	for _, a := range s.Attributes {
		if string(a.Key) == key {
			return a.Value.Emit()
		}
	}
	return ""
}

// A run under a parent span (what `switchyard run` does with tracing on):
// one span per firing under it, one child span per handler attempt.
func TestSpansOfAPipeline(t *testing.T) {
	exp, tp := tracing(t)
	tel := observe.New(observe.Options{Tracer: tp, DefaultProvider: "mock"})
	ctx, root := tp.Tracer("test").Start(context.Background(), "run")
	e := start(t, tel, `digraph m {
		graph [goal="g", default_max_retries=0]
		start [shape=Mdiamond]
		work  [prompt="w", max_retries=2]
		exit  [shape=Msquare]
		start -> work -> exit
	}`, `{"work": [{"status":"retry","notes":"503"}, {"status":"retry","notes":"503"}, {"status":"success"}]}`,
		false, nodes.Caller{Trace: observe.TraceParent(ctx)})
	done := e.waitEvent("session.completed", kind("session.completed"))
	require.Equal(t, "success", done.Status)
	root.End()

	spans := exp.GetSpans()
	rootSC := root.SpanContext()
	for _, node := range []string{"start", "work", "exit"} {
		fires := spansNamed(spans, "fire "+node)
		require.Len(t, fires, 1, "one firing span for %s", node)
		f := fires[0]
		require.Equal(t, rootSC.TraceID(), f.SpanContext.TraceID(), "%s is in the run's trace", node)
		require.Equal(t, rootSC.SpanID(), f.Parent.SpanID(), "%s is a child of the run's span", node)
		require.Equal(t, node, attr(f, "switchyard.node"))
		require.Equal(t, e.s.ID(), attr(f, "switchyard.session"))
		require.Equal(t, "success", attr(f, "switchyard.status"))
	}
	work := spansNamed(spans, "fire work")[0]
	require.Equal(t, "3", attr(work, "switchyard.attempts"))
	var attempts []tracetest.SpanStub
	for _, s := range spans {
		if s.Parent.SpanID() == work.SpanContext.SpanID() {
			attempts = append(attempts, s)
		}
	}
	require.Len(t, attempts, 3, "a child span per attempt")
	for i, a := range spansNamed(attempts, "attempt 1") {
		require.Equal(t, "retry", attr(a, "switchyard.status"), "attempt %d", i+1)
	}
	require.Len(t, spansNamed(attempts, "attempt 3"), 1)
	require.Equal(t, "success", attr(spansNamed(attempts, "attempt 3")[0], "switchyard.status"))
	for _, a := range attempts {
		require.False(t, a.StartTime.Before(work.StartTime), "the attempt starts within its firing")
		require.False(t, a.EndTime.After(work.EndTime), "the attempt ends within its firing")
	}
}

// An outside publisher starts a span and publishes an envelope with the W3C
// traceparent header (as an OpenTelemetry propagator writes it): the
// firings it causes, downstream too, continue its trace — on core NATS and
// through JetStream (durable sessions).
func TestOutsideTraceContinuesThroughTheSession(t *testing.T) {
	for _, durable := range []bool{false, true} {
		t.Run(fmt.Sprintf("durable=%v", durable), func(t *testing.T) {
			exp, tp := tracing(t)
			tel := observe.New(observe.Options{Tracer: tp})
			e := start(t, tel, `digraph s { kind="session"; a [prompt="a"]; b [prompt="b"]; a -> b }`, "", true, nodes.Caller{}, durable)

			outside := sdktrace.NewTracerProvider() // the publisher's own SDK
			t.Cleanup(func() { _ = outside.Shutdown(context.Background()) })
			ctx, span := outside.Tracer("publisher").Start(context.Background(), "publish order", trace.WithSpanKind(trace.SpanKindProducer))
			hdr := nats.Header{}
			propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(hdr))
			require.NotEmpty(t, hdr.Get("Traceparent"))
			e.publish(broker.NodeIn(e.s.ID(), "a"), "order 42", hdr)
			e.waitEvent("b completed", func(ev *pb.Event) bool { return ev.Kind == "node.completed" && ev.Node == "b" })
			span.End()

			sc := span.SpanContext()
			spans := exp.GetSpans()
			for _, node := range []string{"a", "b"} {
				fires := spansNamed(spans, "fire "+node)
				require.Len(t, fires, 1, node)
				require.Equal(t, sc.TraceID(), fires[0].SpanContext.TraceID(), "%s continues the publisher's trace", node)
				require.Equal(t, sc.SpanID(), fires[0].Parent.SpanID(), "%s's parent is the publisher's span", node)
				require.True(t, fires[0].Parent.IsRemote())
			}
		})
	}
}

// Without a caller trace each firing is a trace of its own; a caller trace
// that is not W3C is kept as an attribute.
func TestSpansWithoutAW3CCaller(t *testing.T) {
	exp, tp := tracing(t)
	tel := observe.New(observe.Options{Tracer: tp})
	e := start(t, tel, `digraph s { kind="session"; a [prompt="a"] }`, "", true, nodes.Caller{})
	e.publish(broker.NodeIn(e.s.ID(), "a"), "x", nats.Header{"Sy-Trace": []string{"req-17"}})
	e.waitEvent("a completed", func(ev *pb.Event) bool { return ev.Kind == "node.completed" && ev.Node == "a" })
	fires := spansNamed(exp.GetSpans(), "fire a")
	require.Len(t, fires, 1)
	require.False(t, fires[0].Parent.IsValid(), "a root span")
	require.Equal(t, "req-17", attr(fires[0], "switchyard.caller.trace"))
}
