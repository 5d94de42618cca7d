package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/pool"
	"github.com/switchyard/switchyard/session"
)

// TestFinishedSessionForgetsOutcomes: the outcome stream keeps a
// session's job outcomes (for an owner that takes it over) with no count
// shared by every session, and purges them when the session completes —
// what bounds it, instead of a global count a busy deployment exceeds
// while another session's job may still be queued again.
func TestFinishedSessionForgetsOutcomes(t *testing.T) {
	for _, durable := range []bool{true, false} {
		name := map[bool]string{true: "durable", false: "not durable"}[durable]
		t.Run(name, func(t *testing.T) {
			r := newRun(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			js := r.broker.JetStream()
			reg := nodes.NewRegistry()
			require.NoError(t, nodes.RegisterBuiltins(reg, nodes.Deps{}))
			wctx, wstop := context.WithCancel(ctx)
			w := &pool.Worker{NC: r.broker.Conn(), JS: js, Pool: "p", Registry: reg, WorkDir: t.TempDir()}
			wdone := make(chan error, 1)
			go func() { wdone <- w.Run(wctx) }()
			defer func() { wstop(); require.NoError(t, <-wdone) }()

			src := `digraph R { start [shape=Mdiamond]; x [shape=parallelogram, pool=p, tool_command="echo hi"]; exit [shape=Msquare]; start -> x -> exit }`
			cfg := r.config(r.load(src))
			cfg.ID = "outcomes"
			if durable {
				cfg = r.durable(src, "outcomes")
				cfg.Checkpoint = &session.CheckpointPolicy{Retain: true}
			}
			s, err := session.Start(ctx, cfg)
			require.NoError(t, err)
			rep, err := s.Wait(ctx)
			require.NoError(t, err)
			require.Equal(t, "success", rep.Status, rep.Reason)
			s.Stop()

			st, err := js.Stream(ctx, pool.OutcomeStream)
			require.NoError(t, err)
			require.LessOrEqual(t, st.CachedInfo().Config.MaxMsgs, int64(0), "no count shared by every session")
			info, err := st.Info(ctx, jetstream.WithSubjectFilter("syo.outcomes.>"))
			require.NoError(t, err)
			require.Empty(t, info.State.Subjects, "the completed session's outcomes are purged")
		})
	}
}

// TestNewSessionForgetsEarlierJobs: a new session whose graph has pool
// nodes purges, when it starts — before any of its nodes fires — the jobs
// an earlier session of its id left queued, so that no worker runs them
// beside it; a resume keeps its own.
func TestNewSessionForgetsEarlierJobs(t *testing.T) {
	r := newRun(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	js := r.broker.JetStream()
	src := `digraph s { kind="session"; x [shape=parallelogram, pool=p, tool_command="echo hi"] }`
	g := r.load(src)
	// An earlier session "reuse" queued a job (no worker ran it) and is gone.
	hctx, hcancel := context.WithCancel(ctx)
	queued := make(chan struct{})
	in := &nodes.Input{SessionID: "reuse", Graph: g, Node: g.Node("x"), Type: "tool", Attempt: 1,
		AttemptID: "reuse/x/1/1", Context: map[string]string{},
		Emit: func(kind string, _ map[string]any) {
			if kind == "work.queued" {
				close(queued)
			}
		}}
	h, err := (&pool.Dispatcher{NC: r.broker.Conn(), JS: js, Storage: r.broker.Storage(), Key: []byte("the earlier session's key......."),
		Fresh: true}).Handler("p")
	require.NoError(t, err)
	dead := make(chan error, 1)
	go func() { _, err := h.Handle(hctx, in); dead <- err }()
	select {
	case <-queued:
	case <-ctx.Done():
		t.Fatal("not queued")
	}
	hcancel()
	require.ErrorIs(t, <-dead, context.Canceled)
	jobs := func() int {
		t.Helper()
		st, err := js.Stream(ctx, pool.Stream)
		require.NoError(t, err)
		info, err := st.Info(ctx, jetstream.WithSubjectFilter("syw.*.reuse.>"))
		require.NoError(t, err)
		return len(info.State.Subjects)
	}
	require.Equal(t, 1, jobs())

	cfg := r.config(g)
	cfg.ID = "reuse"
	s, err := session.Start(ctx, cfg)
	require.NoError(t, err)
	defer s.Stop()
	require.Equal(t, 0, jobs(), "the earlier session's job is purged at the start, before any firing")
}
