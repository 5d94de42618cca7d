package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/session"
)

// A session handed over lets its running firing finish and records it
// before it stops, and releases its lease at once: the next owner resumes
// it at once and runs the rest, nothing twice.
func TestHandoverFinishesRunningFirings(t *testing.T) {
	src := `digraph d { start [shape=Mdiamond]; exit [shape=Msquare]
		a [type="custom.slow"]; b [type="custom.echo"]
		start -> a -> b -> exit }`
	cnt := newCounter()
	started, release := make(chan struct{}, 1), make(chan struct{})
	reg := func(reg *nodes.Registry) {
		echo := nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
			cnt.add(in)
			return &nodes.Outcome{Status: nodes.StatusSuccess, Response: in.Node.ID + " done"}, nil
		})
		slow := nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
			cnt.add(in)
			started <- struct{}{}
			select {
			case <-release:
				return &nodes.Outcome{Status: nodes.StatusSuccess, Response: "a done"}, nil
			case <-ctx.Done(): // cut short: the next owner would run it again
				return nil, ctx.Err()
			}
		})
		require.NoError(t, reg.Register(nodes.Info{Type: "custom.echo", Handler: echo}))
		require.NoError(t, reg.Register(nodes.Info{Type: "custom.slow", Handler: slow}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := &run{t: t, broker: newRun(t).broker, reg: reg}
	cfg := r.config(r.load(src))
	cfg.ID, cfg.Durable, cfg.LogsDir = "moving", true, ""
	s1, err := session.Start(ctx, cfg)
	require.NoError(t, err)
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("a never started")
	}
	handed := make(chan error, 1)
	go func() { handed <- s1.Handover(ctx) }()
	// The handover began: a still runs; let it finish.
	require.Eventually(t, func() bool { return r.event("session.handing_over", "") != nil }, 30*time.Second, 5*time.Millisecond)
	close(release)
	select {
	case err := <-handed:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("the handover did not end")
	}
	require.NotNil(t, r.event("session.moved", ""))
	require.Nil(t, r.event("session.stopped", ""), "a move is not a stop")
	require.NotNil(t, r.event("node.completed", "a"), "a's firing finished here")
	require.Nil(t, r.event("node.started", "b"), "b did not start here")
	o, err := session.ReadOwner(ctx, r.broker, "moving", time.Now())
	require.NoError(t, err)
	require.Nil(t, o, "the lease is released at once")

	r2 := &run{t: t, broker: r.broker, reg: reg}
	cfg2 := r2.config(r2.load(src))
	cfg2.ID, cfg2.Durable, cfg2.LogsDir = "moving", true, ""
	s2, err := session.Resume(ctx, cfg2)
	require.NoError(t, err)
	rep, err := s2.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status, rep.Reason)
	require.Equal(t, 1, cnt.get("a"), "a ran once")
	require.Equal(t, 1, cnt.get("b"), "b ran once, at the next owner")
}

// A firing that does not end within the handover's time is cut short (and
// runs again at the next owner): Handover says so.
func TestHandoverBounded(t *testing.T) {
	src := `digraph d { start [shape=Mdiamond]; exit [shape=Msquare]; a [type="custom.hang"]; start -> a -> exit }`
	started := make(chan struct{}, 1)
	reg := func(reg *nodes.Registry) {
		hang := nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
			started <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		})
		require.NoError(t, reg.Register(nodes.Info{Type: "custom.hang", Handler: hang}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := &run{t: t, broker: newRun(t).broker, reg: reg}
	cfg := r.config(r.load(src))
	cfg.ID, cfg.Durable, cfg.LogsDir = "stuck", true, ""
	s, err := session.Start(ctx, cfg)
	require.NoError(t, err)
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("a never started")
	}
	hctx, hcancel := context.WithCancel(ctx)
	hcancel()
	require.ErrorIs(t, s.Handover(hctx), context.Canceled)
	o, err := session.ReadOwner(ctx, r.broker, "stuck", time.Now())
	require.NoError(t, err)
	require.Nil(t, o)
}
