package session_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/nodes/agent"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

// run is one test run of a pipeline on the real runtime: an embedded NATS
// server, real actors, the built-in handlers and the mock provider.
type run struct {
	t       *testing.T
	broker  *broker.Broker
	logs    string
	mock    string // JSON mock script
	answers map[string][]string
	reg     func(*nodes.Registry)
	ctx     map[string]string

	mu     sync.Mutex
	events []*pb.Event
}

func newRun(t *testing.T, opts ...brokertest.Option) *run {
	return &run{t: t, broker: brokertest.Start(t, opts...), logs: t.TempDir()}
}

// shortWindow gives the sessions' work streams the shortest duplicate
// window, for the tests that see them trimmed of what was consumed: a
// trim keeps the window's messages (2 minutes by default).
var shortWindow = brokertest.Configure(func(c *broker.Config) { c.DuplicateWindow = broker.MinDuplicateWindow })

func (r *run) load(src string) *graph.Graph {
	r.t.Helper()
	g, diags := graph.Load("test.dot", []byte(src), graph.WithKnownTypes(append(builtinTypes(), "custom.echo", "custom.flaky")...))
	require.False(r.t, diags.HasErrors(), "diagnostics: %v", diags)
	require.NotNil(r.t, g)
	return g
}

func builtinTypes() []string {
	reg := nodes.NewRegistry()
	_ = nodes.RegisterBuiltins(reg, nodes.Deps{})
	return reg.Types()
}

// onCluster starts a three-server cluster (the test is skipped with
// -short) and a broker connected to it, both closed when the test ends,
// and a context that ends after d.
func onCluster(t *testing.T, d time.Duration) (context.Context, *brokertest.Cluster, *broker.Broker) {
	t.Helper()
	if testing.Short() {
		t.Skip("a three-server cluster: not with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	cl := brokertest.StartCluster(t, 3)
	b, err := broker.Start(ctx, broker.Config{URL: cl.URL()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return ctx, cl, b
}

// durable is the configuration of a durable session id of the graph src,
// logging nowhere.
func (r *run) durable(src, id string) session.Config {
	r.t.Helper()
	cfg := r.config(r.load(src))
	cfg.ID, cfg.Durable, cfg.LogsDir = id, true, ""
	return cfg
}

func (r *run) config(g *graph.Graph) session.Config {
	r.t.Helper()
	var m *agent.Mock
	if r.mock != "" {
		p := filepath.Join(r.t.TempDir(), "mock.json")
		require.NoError(r.t, os.WriteFile(p, []byte(r.mock), 0o644))
		var err error
		m, err = agent.LoadMockFile(p)
		require.NoError(r.t, err)
	} else {
		m = agent.NewMock(nil)
	}
	deps := nodes.Deps{
		Providers:       func(string) (agent.Provider, error) { return m, nil },
		DefaultProvider: "mock",
		Interviewer:     nodes.NewQueue(r.answers),
	}
	reg := nodes.NewRegistry()
	require.NoError(r.t, nodes.RegisterBuiltins(reg, deps))
	if r.reg != nil {
		r.reg(reg)
	}
	return session.Config{
		Graph: g, Broker: r.broker, Registry: reg, LogsDir: r.logs, Context: r.ctx,
		Backoff:  func(int) time.Duration { return 0 },
		Observer: r.observe,
	}
}

func (r *run) observe(ev *pb.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

// exec runs src to completion and returns the report.
func (r *run) exec(src string) *session.Report {
	r.t.Helper()
	return r.runConfig(r.config(r.load(src)))
}

// runConfig runs cfg to completion (within 30 seconds) and returns the
// report.
func (r *run) runConfig(cfg session.Config) *session.Report {
	r.t.Helper()
	_, rep := r.runSession(cfg)
	return rep
}

// runSession is runConfig that also returns the session.
func (r *run) runSession(cfg session.Config) (*session.Session, *session.Report) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := session.Start(ctx, cfg)
	require.NoError(r.t, err)
	rep, err := s.Wait(ctx)
	require.NoError(r.t, err, "session did not complete")
	return s, rep
}

// visits lists the nodes in the order their visits completed.
func (r *run) visits() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, ev := range r.events {
		if ev.Kind == "node.completed" {
			out = append(out, ev.Node)
		}
	}
	return out
}

// kinds counts events by kind.
func (r *run) kinds() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for _, ev := range r.events {
		out[ev.Kind]++
	}
	return out
}

func (r *run) event(kind, node string) *pb.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range r.events {
		if ev.Kind == kind && (node == "" || ev.Node == node) {
			return ev
		}
	}
	return nil
}

func (r *run) file(parts ...string) string {
	r.t.Helper()
	data, err := os.ReadFile(filepath.Join(append([]string{r.logs}, parts...)...))
	require.NoError(r.t, err)
	return string(data)
}

func join(s ...string) string { return strings.Join(s, " ") }

// waitFor registers the handler type custom.wait: it closes entered (when
// not nil) and waits for release (or its context).
func (r *run) waitFor(entered chan<- struct{}, release <-chan struct{}) {
	r.reg = func(reg *nodes.Registry) {
		_ = reg.Register(nodes.Info{Type: "custom.wait", Handler: nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
			if entered != nil {
				close(entered)
			}
			select {
			case <-release:
				return &nodes.Outcome{Status: nodes.StatusSuccess}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})})
	}
}

// journalWatch sees the journal entries a durable session writes (their
// subject: subj), from a connection of its own.
type journalWatch struct {
	t   *testing.T
	nc  *nats.Conn
	sub *nats.Subscription
}

func watchJournal(t *testing.T, b *broker.Broker, subj string) *journalWatch {
	t.Helper()
	nc, err := b.NewConn()
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	sub, err := nc.SubscribeSync(subj)
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	return &journalWatch{t: t, nc: nc, sub: sub}
}

// written is how many entries were written so far: every entry published
// before the flush has reached the watcher.
func (w *journalWatch) written() int {
	w.t.Helper()
	require.NoError(w.t, w.nc.Flush())
	n, _, err := w.sub.Pending()
	require.NoError(w.t, err)
	return n
}

// next waits for the next entry.
func (w *journalWatch) next() {
	w.t.Helper()
	_, err := w.sub.NextMsg(10 * time.Second)
	require.NoError(w.t, err)
}

// historyNodes is the node of each record of a durable session's history.
func historyNodes(t *testing.T, b *broker.Broker, id string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hist, err := session.History(ctx, b, id)
	require.NoError(t, err)
	var nodes []string
	for _, h := range hist {
		nodes = append(nodes, h.Node)
	}
	return nodes
}
