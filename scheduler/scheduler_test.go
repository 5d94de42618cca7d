package scheduler_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/scheduler"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// notices collects the scheduler's notices.
type notices struct {
	mu   sync.Mutex
	list []scheduler.Notice
}

func (n *notices) add(x scheduler.Notice) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.list = append(n.list, x)
}

func (n *notices) take() []scheduler.Notice {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := n.list
	n.list = nil
	return out
}

func newSched(t *testing.T, src string) (*scheduler.Scheduler, *clock.Fake, *notices) {
	t.Helper()
	g, diags := graph.Load("t.dot", []byte(src), graph.AsSession())
	require.False(t, diags.HasErrors(), "%v", diags)
	cfg, err := scheduler.ConfigFrom(g)
	require.NoError(t, err)
	clk := clock.NewFake(t0)
	ns := &notices{}
	s, err := scheduler.New(cfg, clk, ns.add)
	require.NoError(t, err)
	s.Start()
	t.Cleanup(s.Close)
	return s, clk, ns
}

func offer(t *testing.T, s *scheduler.Scheduler, node, edge string, item any) scheduler.Decision {
	t.Helper()
	d, err := s.Offer(node, edge, item)
	require.NoError(t, err)
	return d
}

func admit(t *testing.T, s *scheduler.Scheduler, node string) *scheduler.Ticket {
	t.Helper()
	tk, w, _ := s.Admit(node)
	require.Nil(t, w)
	require.NotNil(t, tk)
	return tk
}

func config(t *testing.T, src string) *scheduler.Config {
	t.Helper()
	g, diags := graph.Load("t.dot", []byte(src), graph.AsSession())
	require.False(t, diags.HasErrors(), "%v", diags)
	cfg, err := scheduler.ConfigFrom(g)
	require.NoError(t, err)
	return cfg
}

// TestConfigOfIsReadOncePerGraph: the sessions of one graph share its
// Config; a scheduler on it changes nothing of it.
func TestConfigOfIsReadOncePerGraph(t *testing.T) {
	g, diags := graph.Load("t.dot", []byte(`digraph t { kind="session"; a [label="a"]; b [label="b", max_iterations=1]; a -> b }`), graph.AsSession())
	require.False(t, diags.HasErrors(), "%v", diags)
	cfg, err := scheduler.ConfigOf(g)
	require.NoError(t, err)
	want, err := scheduler.ConfigFrom(g)
	require.NoError(t, err)
	require.Equal(t, want, cfg)
	again, err := scheduler.ConfigOf(g)
	require.NoError(t, err)
	require.Same(t, cfg, again)
	s, err := scheduler.New(cfg, clock.NewFake(t0), nil)
	require.NoError(t, err)
	s.Start()
	tk, _, _ := s.Admit("b")
	require.NotNil(t, tk)
	s.Release(tk, scheduler.Result{})
	s.Close()
	require.Equal(t, want, cfg, "a scheduler changed the shared Config")
}
