package session_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/session"
)

const resumeSrc = `digraph resume {
	graph [goal="resume"]
	start [shape=Mdiamond]
	a [type="custom.echo", say="a"]
	b [type="custom.echo", say="b"]
	c [type="custom.flaky"]
	d [type="custom.echo", say="d"]
	exit [shape=Msquare]
	start -> a -> b -> c -> d -> exit
}`

// TestResumeFromCheckpoint interrupts a run while c is running, resumes it
// from the checkpoint and checks that the result equals an uninterrupted
// run: a and b are not run again, c, d and exit are.
func TestResumeFromCheckpoint(t *testing.T) {
	var mu sync.Mutex
	counts := map[string]int{}
	count := func(id string) {
		mu.Lock()
		counts[id]++
		mu.Unlock()
	}
	echo := nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
		count(in.Node.ID)
		return &nodes.Outcome{Status: nodes.StatusSuccess, Response: in.Node.Attrs.String("say"),
			ContextUpdates: map[string]string{"seen." + in.Node.ID: "yes"}}, nil
	})
	blocked := make(chan struct{})
	hang := nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
		close(blocked)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	ok := nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
		count(in.Node.ID)
		return &nodes.Outcome{Status: nodes.StatusSuccess, Response: "c done"}, nil
	})

	// The uninterrupted run, for comparison.
	ref := newRun(t)
	ref.reg = func(reg *nodes.Registry) {
		require.NoError(t, reg.Register(nodes.Info{Type: "custom.echo", Handler: echo}))
		require.NoError(t, reg.Register(nodes.Info{Type: "custom.flaky", Handler: ok}))
	}
	refRep := ref.exec(resumeSrc)
	require.Equal(t, "success", refRep.Status)
	var refCP session.Checkpoint
	require.NoError(t, json.Unmarshal([]byte(ref.file("checkpoint.json")), &refCP))

	// The interrupted run.
	mu.Lock()
	counts = map[string]int{}
	mu.Unlock()
	r := newRun(t)
	r.reg = func(reg *nodes.Registry) {
		require.NoError(t, reg.Register(nodes.Info{Type: "custom.echo", Handler: echo}))
		require.NoError(t, reg.Register(nodes.Info{Type: "custom.flaky", Handler: hang}))
	}
	g := r.load(resumeSrc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := session.Start(ctx, r.config(g))
	require.NoError(t, err)
	select {
	case <-blocked:
	case <-ctx.Done():
		t.Fatal("c never started")
	}
	s.Stop() // the process dies while c runs
	cp, err := session.ReadCheckpoint(r.logs)
	require.NoError(t, err)
	require.Equal(t, "running", cp.Status)
	require.Equal(t, "b", cp.CurrentNode)
	require.Len(t, cp.Pending, 1, "the envelope to c is still pending")

	// Resume with a c that works.
	r.reg = func(reg *nodes.Registry) {
		require.NoError(t, reg.Register(nodes.Info{Type: "custom.echo", Handler: echo}))
		require.NoError(t, reg.Register(nodes.Info{Type: "custom.flaky", Handler: ok}))
	}
	cfg := r.config(g)
	s2, err := session.Resume(ctx, cfg)
	require.NoError(t, err)
	rep, err := s2.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status, rep.Reason)
	mu.Lock()
	require.Equal(t, map[string]int{"a": 1, "b": 1, "c": 1, "d": 1}, counts, "nothing lost, nothing run twice")
	mu.Unlock()

	var got session.Checkpoint
	require.NoError(t, json.Unmarshal([]byte(r.file("checkpoint.json")), &got))
	require.Equal(t, refCP.CompletedNodes, got.CompletedNodes)
	require.Equal(t, refCP.NodeOutcomes, got.NodeOutcomes)
	require.Equal(t, refCP.Status, got.Status)
	require.Equal(t, refCP.Context["seen.d"], got.Context["seen.d"])
	require.Equal(t, refCP.Context["seen.a"], got.Context["seen.a"])
}
