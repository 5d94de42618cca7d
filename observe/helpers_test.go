package observe_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/nodes/agent"
	"github.com/switchyard/switchyard/observe"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

// env is a test session on the real runtime (embedded NATS, actors,
// built-in handlers, the mock provider), instrumented by a Telemetry.
type env struct {
	t      *testing.T
	b      *broker.Broker
	tel    *observe.Telemetry
	s      *session.Session
	events chan *pb.Event
}

func start(t *testing.T, tel *observe.Telemetry, src, mock string, asSession bool, caller nodes.Caller, durable ...bool) *env {
	t.Helper()
	opts := []graph.LoadOption{graph.WithKnownTypes(builtinTypes()...)}
	if asSession {
		opts = append(opts, graph.AsSession())
	}
	g, diags := graph.Load("test.dot", []byte(src), opts...)
	require.False(t, diags.HasErrors(), "%v", diags)
	m := agent.NewMock(nil)
	if mock != "" {
		var err error
		m, err = agent.ParseMock([]byte(mock))
		require.NoError(t, err)
	}
	e := &env{t: t, b: brokertest.Start(t), tel: tel, events: make(chan *pb.Event, 10000)}
	cfg := session.Config{ID: session.NewID(), Graph: g, Broker: e.b, LogsDir: t.TempDir(), Caller: caller, Durable: len(durable) > 0 && durable[0],
		Backoff:  func(int) time.Duration { return 0 },
		Observer: func(ev *pb.Event) { e.events <- ev },
		Deps:     nodes.Deps{Providers: func(string) (agent.Provider, error) { return m, nil }, DefaultProvider: "mock"}}
	tel.Instrument(&cfg)
	s, err := session.Start(context.Background(), cfg)
	require.NoError(t, err)
	e.s = s
	untrack := tel.Track(s)
	t.Cleanup(func() { s.Stop(); untrack() })
	return e
}

func builtinTypes() []string {
	reg := nodes.NewRegistry()
	_ = nodes.RegisterBuiltins(reg, nodes.Deps{})
	return reg.Types()
}

// waitEvent waits for an event matching f (events before it are skipped).
func (e *env) waitEvent(what string, f func(*pb.Event) bool) *pb.Event {
	e.t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case ev := <-e.events:
			if f(ev) {
				return ev
			}
		case <-deadline:
			e.t.Fatalf("no %s within 20s", what)
		}
	}
}

func kind(k string) func(*pb.Event) bool { return func(ev *pb.Event) bool { return ev.Kind == k } }

// publish sends an envelope as an outside client would, with headers.
func (e *env) publish(subject, text string, header nats.Header) {
	e.t.Helper()
	env := &pb.Envelope{Id: fmt.Sprintf("t.%d", time.Now().UnixNano()), Kind: "handoff", Payload: &pb.Payload{Message: text}}
	data, err := proto.Marshal(env)
	require.NoError(e.t, err)
	require.NoError(e.t, e.b.Conn().PublishMsg(&nats.Msg{Subject: subject, Data: data, Header: header}))
	require.NoError(e.t, e.b.Conn().Flush())
}

// scrape reads the metrics over HTTP, as Prometheus would.
func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/plain")
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	require.NoError(t, err, "the exposition parses:\n%s", body)
	return fams
}

// value is the value of the series of family name whose labels include
// labels; found is false when there is none.
func value(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (v float64, found bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, want := range labels {
			if have[k] != want {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

func requireValue(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string, want float64) {
	t.Helper()
	got, ok := value(fams, name, labels)
	require.True(t, ok, "no series %s%v", name, labels)
	require.InDelta(t, want, got, 1e-9, "%s%v", name, labels)
}
