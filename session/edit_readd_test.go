package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/session"
)

const readdV1 = `digraph s { kind="session"; m [prompt="m"]; x [type="block"] }`

// removedWhileRunning serves readdV1 with x's handler block, starts x,
// removes it by a live edit while it runs, and fails an edit that adds it
// back.
func removedWhileRunning(t *testing.T, block nodes.Handler, started <-chan struct{}) *served {
	t.Helper()
	sv := serveSession(t, readdV1, func(c *session.Config) { c.Handlers = map[string]nodes.Handler{"block": block} })
	sv.pub("x", "work")
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("x never started")
	}
	_, diags, err := sv.s.Edit("v2.dot", []byte(`digraph s { kind="session"; m [prompt="m"] }`))
	require.NoError(t, err, "%v", diags)
	_, _, err = sv.s.Edit("v3.dot", []byte(readdV1))
	require.Error(t, err, "x is still finishing its removal")
	require.Contains(t, err.Error(), "still finishing")
	return sv
}

// TestReaddNodeStillFinishing: a node removed by a live edit while it runs
// keeps running until its work is done; an edit that adds it back before
// then is refused with the reason (it is not silently half-applied), the
// session keeps running, and Stop returns.
func TestReaddNodeStillFinishing(t *testing.T) {
	started, release := make(chan struct{}, 1), make(chan struct{})
	block := nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return &nodes.Outcome{Status: nodes.StatusSuccess}, nil
	})
	sv := removedWhileRunning(t, block, started)
	sv.wait("session.edit_failed", "")

	close(release)
	sv.wait("node.removed", "x")
	_, diags, err := sv.s.Edit("v4.dot", []byte(readdV1))
	require.NoError(t, err, "%v", diags)
	sv.pub("x", "again")
	<-started
	stopped := make(chan struct{})
	go func() { sv.s.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("Stop did not return")
	}
}

// TestStopWhileRemovedNodeRuns: Stop returns while a node removed by a
// live edit is still running (its handler ends with the session's
// context), after an edit that tried to add it back failed.
func TestStopWhileRemovedNodeRuns(t *testing.T) {
	started := make(chan struct{}, 1)
	block := nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	sv := removedWhileRunning(t, block, started)
	stopped := make(chan struct{})
	go func() { sv.s.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("Stop did not return")
	}
}
