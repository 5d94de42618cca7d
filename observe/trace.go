package observe

import (
	"context"
	"strconv"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchyard/switchyard/nodes"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// tracerName is the instrumentation scope of Switchyard's spans.
const tracerName = "github.com/switchyard/switchyard"

// tracer keeps the open firing spans. A firing span is opened by whichever
// comes first — the node.started event or the firing's first handler
// attempt — and closed by node.completed; attempt spans are its children.
type tracer struct {
	tr trace.Tracer

	mu      sync.Mutex
	firings map[string]*firing // session/node/firing -> its span
	// open holds each node's open firings, oldest first (session/node ->
	// keys): a node's next firing may start before the event goroutine
	// has seen the last one complete.
	open map[string][]string
}

type firing struct {
	ctx  context.Context
	span trace.Span
}

func newTracer(tp trace.TracerProvider) *tracer {
	return &tracer{tr: tp.Tracer(tracerName), firings: map[string]*firing{}, open: map[string][]string{}}
}

// parentOf is the context whose span a firing continues: the caller's
// trace when it is a W3C traceparent, else none (a new trace).
func parentOf(traceParent string) context.Context {
	ctx := context.Background()
	if traceParent == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": traceParent})
}

// TraceParent formats the span of ctx as a W3C traceparent, "" when ctx
// has no valid span. Set it as the session's caller trace
// (nodes.Caller.Trace) to make the session's spans children of ctx's.
func TraceParent(ctx context.Context) string {
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"]
}

// open returns a firing's span, opening it when it is not yet.
func (t *tracer) start(key, sess, node, typ, traceParent string, opts ...trace.SpanStartOption) *firing {
	t.mu.Lock()
	defer t.mu.Unlock()
	if f := t.firings[key]; f != nil {
		return f
	}
	attrs := []attribute.KeyValue{
		attribute.String("switchyard.session", sess),
		attribute.String("switchyard.node", node),
	}
	if typ != "" {
		attrs = append(attrs, attribute.String("switchyard.node.type", typ))
	}
	if i := strings.LastIndexByte(key, '/'); i >= 0 {
		if n, err := strconv.ParseUint(key[i+1:], 10, 64); err == nil {
			attrs = append(attrs, attribute.Int64("switchyard.firing", int64(n)))
		}
	}
	if traceParent != "" && !trace.SpanContextFromContext(parentOf(traceParent)).IsValid() {
		// A caller trace that is not W3C is kept as an attribute.
		attrs = append(attrs, attribute.String("switchyard.caller.trace", traceParent))
	}
	opts = append(opts, trace.WithAttributes(attrs...), trace.WithSpanKind(trace.SpanKindConsumer))
	ctx, span := t.tr.Start(parentOf(traceParent), "fire "+node, opts...)
	f := &firing{ctx: ctx, span: span}
	t.firings[key] = f
	t.open[sess+"/"+node] = append(t.open[sess+"/"+node], key)
	return f
}

// event opens and closes firing spans on node.started and node.completed.
func (t *tracer) event(sess string, ev *pb.Event) {
	switch ev.Kind {
	case "node.started":
		var fire uint64
		var typ, tr string
		for _, kv := range ev.Attrs {
			switch kv.Key {
			case "firing":
				fire, _ = strconv.ParseUint(kv.Value, 10, 64)
			case "type":
				typ = kv.Value
			case "trace":
				tr = kv.Value
			}
		}
		var opts []trace.SpanStartOption
		if ev.Time != nil {
			opts = append(opts, trace.WithTimestamp(ev.Time.AsTime()))
		}
		t.start(firingKey(sess, ev.Node, fire), sess, ev.Node, typ, tr, opts...)
	case "node.completed":
		t.mu.Lock()
		var f *firing
		if keys := t.open[sess+"/"+ev.Node]; len(keys) > 0 {
			f = t.firings[keys[0]]
			delete(t.firings, keys[0])
			if len(keys) == 1 {
				delete(t.open, sess+"/"+ev.Node)
			} else {
				t.open[sess+"/"+ev.Node] = keys[1:]
			}
		}
		t.mu.Unlock()
		if f == nil {
			return
		}
		f.span.SetAttributes(attribute.String("switchyard.status", ev.Status),
			attribute.Int("switchyard.attempts", int(ev.Attempts)))
		if u := ev.Usage; u != nil {
			f.span.SetAttributes(attribute.Int64("switchyard.usage.input_tokens", u.InputTokens),
				attribute.Int64("switchyard.usage.output_tokens", u.OutputTokens),
				attribute.Float64("switchyard.usage.cost", u.Cost))
		}
		if ev.Status == string(nodes.StatusFail) {
			reason := ev.Message
			for _, kv := range ev.Attrs {
				if kv.Key == "failure_reason" {
					reason = kv.Value
				}
			}
			f.span.SetStatus(codes.Error, reason)
		}
		var opts []trace.SpanEndOption
		if ev.Time != nil {
			opts = append(opts, trace.WithTimestamp(ev.Time.AsTime()))
		}
		f.span.End(opts...)
	case "session.completed", "session.stopped", "session.fatal":
		// Firings cut short end with the session.
		t.mu.Lock()
		var open []*firing
		for k, f := range t.firings {
			if strings.HasPrefix(k, sess+"/") {
				open = append(open, f)
				delete(t.firings, k)
			}
		}
		for k := range t.open {
			if strings.HasPrefix(k, sess+"/") {
				delete(t.open, k)
			}
		}
		t.mu.Unlock()
		for _, f := range open {
			f.span.SetStatus(codes.Error, "the session ended first: "+ev.Kind)
			f.span.End()
		}
	}
}

// attempt starts a handler attempt's span under its firing's and returns
// the context the handler runs with and the function that ends the span.
func (t *tracer) attempt(ctx context.Context, in *nodes.Input) (context.Context, func(*nodes.Outcome, error)) {
	key := in.AttemptID
	if i := strings.LastIndexByte(key, '/'); i >= 0 {
		key = key[:i]
	}
	caller, _ := nodes.CallerFrom(ctx)
	f := t.start(key, in.SessionID, in.Node.ID, in.Type, caller.Trace)
	actx, span := t.tr.Start(f.ctx, "attempt "+strconv.Itoa(in.Attempt),
		trace.WithAttributes(attribute.Int("switchyard.attempt", in.Attempt),
			attribute.String("switchyard.attempt_id", in.AttemptID)))
	// The handler gets its caller and deadline from ctx and the span from
	// actx.
	ctx = trace.ContextWithSpan(ctx, trace.SpanFromContext(actx))
	return ctx, func(o *nodes.Outcome, err error) {
		switch {
		case err != nil:
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		case o == nil:
			span.SetStatus(codes.Error, "no outcome")
		default:
			span.SetAttributes(attribute.String("switchyard.status", string(o.Status)))
			if o.Status == nodes.StatusFail || o.Status == nodes.StatusRetry {
				span.SetStatus(codes.Error, o.FailureReason)
			}
		}
		span.End()
	}
}
