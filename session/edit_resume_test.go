package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/session"
)

// A durable session resumed after a live edit (a restart, a takeover, a
// move to another member) runs the graph as edited: the added node fires,
// the removed one is gone.
func TestEditSurvivesResume(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cnt := newCounter()
	reg := func(reg *nodes.Registry) {
		require.NoError(t, reg.Register(nodes.Info{Type: "custom.echo", Handler: nodes.HandlerFunc(
			func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
				cnt.add(in)
				return &nodes.Outcome{Status: nodes.StatusSuccess, Response: in.Node.ID}, nil
			})}))
	}
	r := &run{t: t, broker: newRun(t).broker, reg: reg}
	cfg := r.config(r.load(editV1))
	cfg.ID, cfg.Durable, cfg.LogsDir = "edited", true, ""
	s1, err := session.Start(ctx, cfg)
	require.NoError(t, err)
	_, _, err = s1.Edit("v2.dot", []byte(editV2))
	require.NoError(t, err)
	s1.Stop()

	src, err := session.ReadGraph(ctx, r.broker, "edited")
	require.NoError(t, err)
	require.Contains(t, string(src), "neu")
	require.NotContains(t, string(src), "old")

	r2 := &run{t: t, broker: r.broker, reg: reg}
	cfg2 := r2.config(r2.load(string(src)))
	cfg2.ID, cfg2.Durable, cfg2.LogsDir = "edited", true, ""
	s2, err := session.Resume(ctx, cfg2)
	require.NoError(t, err)
	defer s2.Stop()
	l := &live{run: r2, s: s2}
	l.publish(t, broker.NodeIn("edited", "src"), "after the resume")
	require.Eventually(t, func() bool { return cnt.get("neu") == 1 && cnt.get("a") == 1 }, 30*time.Second, 10*time.Millisecond)
	require.Zero(t, cnt.get("old"))
}
