package observe

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/nodes/agent"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

// Options configure a Telemetry.
type Options struct {
	// Tracer provides the tracer of firing and attempt spans; nil turns
	// tracing off.
	Tracer trace.TracerProvider
	// DefaultProvider labels the usage of nodes without llm_provider.
	DefaultProvider string
	// Clock measures handler attempts and journal writes (default: real).
	Clock clock.Clock
	// ProcessMetrics adds the Go runtime and process collectors.
	ProcessMetrics bool
}

// Telemetry holds the metrics of every session it instruments, and their
// tracer. It is safe for concurrent use.
type Telemetry struct {
	opts   Options
	reg    *prometheus.Registry
	m      *metrics
	tracer *tracer

	mu       sync.Mutex
	states   map[string]string // session id -> running, success, fail, stopped...
	tracked  map[string]*session.Session
	observed map[*graph.Node]*nodeObs // a session's node -> its curried metrics
}

// sessionObs caches a session's series by label values, so that an event
// costs a map lookup instead of hashing its labels (only the session's
// event goroutine uses it).
type sessionObs struct {
	events  map[string]prometheus.Counter    // kind
	firings map[[2]string]prometheus.Counter // node, status
	seconds map[string]prometheus.Observer   // node
}

// nodeObs are a node's metrics with their labels applied, so that the
// per-attempt path does no label hashing.
type nodeObs struct {
	attempt  prometheus.Observer
	provider string
	model    string
}

// New returns a Telemetry with its own Prometheus registry.
func New(opts Options) *Telemetry {
	if opts.Clock == nil {
		opts.Clock = clock.Real()
	}
	reg := prometheus.NewRegistry()
	t := &Telemetry{opts: opts, reg: reg, m: newMetrics(reg), states: map[string]string{},
		tracked: map[string]*session.Session{}, observed: map[*graph.Node]*nodeObs{}}
	if opts.ProcessMetrics {
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	reg.MustRegister(t)
	if opts.Tracer != nil {
		t.tracer = newTracer(opts.Tracer)
	}
	return t
}

// Registry is where the metrics are registered (add your own to it).
func (t *Telemetry) Registry() *prometheus.Registry { return t.reg }

// Handler serves the metrics in the Prometheus exposition format.
func (t *Telemetry) Handler() http.Handler {
	return promhttp.HandlerFor(t.reg, promhttp.HandlerOpts{Registry: t.reg})
}

// Instrument adds the Telemetry's hooks to a session's configuration: its
// event observer (chained before cfg.Observer), a handler middleware
// (outermost) and the journal write hook. cfg.ID must be set.
func (t *Telemetry) Instrument(cfg *session.Config) {
	id := cfg.ID
	next := cfg.Observer
	so := &sessionObs{events: map[string]prometheus.Counter{}, firings: map[[2]string]prometheus.Counter{},
		seconds: map[string]prometheus.Observer{}}
	cfg.Observer = func(ev *pb.Event) {
		t.event(id, so, ev)
		if next != nil {
			next(ev)
		}
	}
	cfg.Middleware = append([]nodes.Middleware{t.middleware()}, cfg.Middleware...)
	prevJournal := cfg.OnJournalWrite
	cfg.OnJournalWrite = func(d time.Duration, err error) {
		t.m.journal.Observe(d.Seconds())
		if err != nil {
			t.m.journalErrors.Inc()
		}
		if prevJournal != nil {
			prevJournal(d, err)
		}
	}
}

// Track makes scrapes read a running session's delivery buffers, budgets
// and node states; the returned func stops that (call it once the session
// is stopped).
func (t *Telemetry) Track(s *session.Session) (untrack func()) {
	t.mu.Lock()
	t.tracked[s.ID()] = s
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		if t.tracked[s.ID()] == s {
			delete(t.tracked, s.ID())
		}
		t.mu.Unlock()
	}
}

// event updates the metrics (and spans) with one session event. It runs on
// the session's event goroutine.
func (t *Telemetry) event(id string, so *sessionObs, ev *pb.Event) {
	c := so.events[ev.Kind]
	if c == nil {
		c = t.m.events.WithLabelValues(id, ev.Kind)
		so.events[ev.Kind] = c
	}
	c.Inc()
	switch ev.Kind {
	case "session.started", "session.resumed", "session.restarted":
		t.setState(id, "running")
	case "session.completed":
		st := ev.Status
		if st == "" {
			st = "completed"
		}
		t.setState(id, st)
	case "session.stopped":
		t.setState(id, "stopped")
	case "session.fatal":
		t.setState(id, "fatal")
	case "node.completed":
		key := [2]string{ev.Node, ev.Status}
		f := so.firings[key]
		if f == nil {
			f = t.m.firings.WithLabelValues(id, ev.Node, ev.Status)
			so.firings[key] = f
		}
		f.Inc()
		if ev.Status == string(nodes.StatusFail) {
			t.m.failures.WithLabelValues(id, ev.Node).Inc()
		}
		sec := so.seconds[ev.Node]
		if sec == nil {
			sec = t.m.firingSeconds.WithLabelValues(id, ev.Node)
			so.seconds[ev.Node] = sec
		}
		sec.Observe(float64(ev.DurationMs) / 1000)
	case "node.retrying":
		t.m.retries.WithLabelValues(id, ev.Node).Inc()
	case "envelope.dropped":
		n := 1
		if ev.EdgeId == "" {
			// Envelopes discarded at once are listed in an attribute.
			for _, kv := range ev.Attrs {
				if kv.Key == "envelopes" && kv.Value != "" {
					n = strings.Count(kv.Value, ",") + 1
				}
			}
		}
		t.m.drops.WithLabelValues(id, ev.Node, ev.EdgeId).Add(float64(n))
	case "node.refused", "budget.exceeded", "iterations.exceeded", "stall.detected":
		t.m.refusals.WithLabelValues(id, ev.Node, ev.Kind).Inc()
	}
	if t.tracer != nil {
		t.tracer.event(id, ev)
	}
}

func (t *Telemetry) setState(id, st string) {
	t.mu.Lock()
	t.states[id] = st
	t.mu.Unlock()
}

// nodeObs returns a node's curried metrics.
func (t *Telemetry) nodeObs(in *nodes.Input) *nodeObs {
	t.mu.Lock()
	defer t.mu.Unlock()
	o := t.observed[in.Node]
	if o == nil {
		o = &nodeObs{attempt: t.m.attempts.WithLabelValues(in.SessionID, in.Node.ID)}
		o.provider, o.model = providerOf(in.Node, t.opts.DefaultProvider), in.Node.LLMModel()
		t.observed[in.Node] = o
	}
	return o
}

// providerOf is the provider a node's agent runs with, in the codergen
// handler's order: llm_provider, the model's provider, the default.
func providerOf(n *graph.Node, def string) string {
	if p := n.LLMProvider(); p != "" {
		return p
	}
	if p := agent.InferProvider(n.LLMModel()); p != "" {
		return p
	}
	return def
}

// middleware measures each handler attempt, counts its usage by provider
// and model, and (tracing on) wraps it in a span.
func (t *Telemetry) middleware() nodes.Middleware {
	return func(next nodes.Handler) nodes.Handler {
		return &observed{t: t, next: next}
	}
}

// observed is a handler wrapped by the Telemetry. It keeps the inner
// handler's nodes.Inliner answer: measuring does not block.
type observed struct {
	t    *Telemetry
	next nodes.Handler
}

func (h *observed) Inline(n *graph.Node) bool {
	i, ok := h.next.(nodes.Inliner)
	return ok && i.Inline(n)
}

func (h *observed) Handle(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
	if in.Node == nil {
		return h.next.Handle(ctx, in)
	}
	t := h.t
	obs := t.nodeObs(in)
	var end func(*nodes.Outcome, error)
	if t.tracer != nil {
		ctx, end = t.tracer.attempt(ctx, in)
	}
	start := t.opts.Clock.Now()
	o, err := h.next.Handle(ctx, in)
	obs.attempt.Observe(t.opts.Clock.Now().Sub(start).Seconds())
	if o != nil {
		if u := o.Usage; u.InputTokens != 0 || u.OutputTokens != 0 || u.Cost != 0 {
			t.m.tokens.WithLabelValues(obs.provider, obs.model, "input").Add(float64(u.InputTokens))
			t.m.tokens.WithLabelValues(obs.provider, obs.model, "output").Add(float64(u.OutputTokens))
			t.m.cost.WithLabelValues(obs.provider, obs.model).Add(u.Cost)
		}
	}
	if end != nil {
		end(o, err)
	}
	return o, err
}

// Describe sends nothing: the scrape-time metrics are unchecked (their
// label sets follow the sessions).
func (t *Telemetry) Describe(chan<- *prometheus.Desc) {}

// Collect reads the tracked sessions' buffers, budgets and node states, and
// the sessions by state.
func (t *Telemetry) Collect(ch chan<- prometheus.Metric) {
	t.mu.Lock()
	byState := map[string]int{}
	for _, st := range t.states {
		byState[st]++
	}
	sessions := make([]*session.Session, 0, len(t.tracked))
	for _, s := range t.tracked {
		sessions = append(sessions, s)
	}
	t.mu.Unlock()
	for st, n := range byState {
		ch <- prometheus.MustNewConstMetric(descSessions, prometheus.GaugeValue, float64(n), st)
	}
	for _, s := range sessions {
		sys := s.System()
		if sys == nil {
			continue
		}
		id := s.ID()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		for _, b := range sys.Buffers(ctx) {
			ch <- prometheus.MustNewConstMetric(descBufferReady, prometheus.GaugeValue, float64(b.Ready), id, b.Node, b.Edge)
			ch <- prometheus.MustNewConstMetric(descBufferHeld, prometheus.GaugeValue, float64(b.Held), id, b.Node, b.Edge)
		}
		cancel()
		for _, b := range sys.Scheduler().Budgets() {
			dims := []struct {
				name         string
				limit, spent float64
			}{
				{"time", b.Limits.Time.Seconds(), b.Spent.Time.Seconds()},
				{"tokens", float64(b.Limits.Tokens), float64(b.Spent.Tokens)},
				{"cost", b.Limits.Cost, b.Spent.Cost},
			}
			for _, d := range dims {
				if d.limit <= 0 {
					continue
				}
				ch <- prometheus.MustNewConstMetric(descBudgetLimit, prometheus.GaugeValue, d.limit, id, b.Scope, d.name)
				ch <- prometheus.MustNewConstMetric(descBudgetSpent, prometheus.GaugeValue, d.spent, id, b.Scope, d.name)
			}
		}
		counts := map[string]int{}
		for _, st := range sys.Scheduler().States() {
			counts[st.State]++
		}
		for st, n := range counts {
			ch <- prometheus.MustNewConstMetric(descNodeStates, prometheus.GaugeValue, float64(n), id, st)
		}
	}
}

// firingKey is the key of a firing: session/node/firing.
func firingKey(session, node string, firing uint64) string {
	return session + "/" + node + "/" + strconv.FormatUint(firing, 10)
}
