package switchyard_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard"
	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/nodes/agent"
	"github.com/switchyard/switchyard/scheduler"
)

// TestRunErrorsNameTheNodeAndWrapTheCause: a failed run's error says
// which node ended it and wraps why, for errors.Is and errors.As.
func TestRunErrorsNameTheNodeAndWrapTheCause(t *testing.T) {
	t.Run("budget", func(t *testing.T) {
		g := switchyard.New("budget").Handler("spend", switchyard.HandlerFunc(
			func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
				in.OnUsage(nodes.Usage{OutputTokens: 150})
				<-ctx.Done()
				return nil, ctx.Err()
			}), switchyard.Attr("budget_tokens", "100"))
		rep, err := switchyard.Run(testCtx(t), g, switchyard.Message{Text: "x"})
		require.ErrorIs(t, err, scheduler.ErrBudgetExceeded)
		var re *switchyard.RunError
		require.ErrorAs(t, err, &re)
		require.Equal(t, []string{"spend"}, re.Path)
		require.Equal(t, rep.SessionID, re.SessionID)
		require.Contains(t, err.Error(), "failed at node spend: ")
		require.Equal(t, switchyard.RunFail, rep.Status)
		require.Equal(t, switchyard.NodeFailed, rep.Node("spend").Status)
	})
	t.Run("timeout", func(t *testing.T) {
		clk := clock.NewFake(time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC))
		started := make(chan struct{})
		g := switchyard.New("timeout").Handler("slow", switchyard.HandlerFunc(
			func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
				close(started)
				<-ctx.Done()
				return nil, ctx.Err()
			}), switchyard.Attr("timeout", "1h"))
		ex, err := switchyard.Stream(testCtx(t), g, switchyard.Message{Text: "x"}, switchyard.WithClock(clk))
		require.NoError(t, err)
		defer ex.Close()
		<-started
		clk.Advance(time.Hour)
		rep, err := ex.Wait(testCtx(t))
		require.ErrorIs(t, err, context.DeadlineExceeded)
		var re *switchyard.RunError
		require.ErrorAs(t, err, &re)
		require.Equal(t, "slow", re.Node())
		require.Equal(t, switchyard.RunFail, rep.Status)
	})
	t.Run("node failed", func(t *testing.T) {
		g := switchyard.New("bad").Agent("bad", switchyard.AgentFunc(func(context.Context, switchyard.Message) (switchyard.Message, error) {
			return switchyard.Message{}, errors.New("service down")
		}))
		rep, err := switchyard.Run(testCtx(t), g, switchyard.Message{Text: "x"})
		require.ErrorIs(t, err, switchyard.ErrNodeFailed)
		require.NotErrorIs(t, err, scheduler.ErrBudgetExceeded)
		var re *switchyard.RunError
		require.ErrorAs(t, err, &re)
		require.Equal(t, "bad", re.Node())
		require.Contains(t, re.Reason, "service down")
		require.Equal(t, "fail", string(rep.Node("bad").Status), "the report's node status is the events' and handlers' fail")
		require.Equal(t, nodes.StatusFail, rep.Node("bad").Status)
	})
	t.Run("success has no error", func(t *testing.T) {
		g := switchyard.New("ok").Agent("a", &echo{prefix: "a"})
		rep, err := switchyard.Run(testCtx(t), g, switchyard.Message{Text: "x"})
		require.NoError(t, err)
		require.Equal(t, switchyard.RunSuccess, rep.Status)
		require.Equal(t, switchyard.NodeSuccess, rep.Node("a").Status)
	})
}

// TestRunErrorPathIntoChildPipeline: a manager node that fails because its
// child pipeline failed names the child's node after its own.
func TestRunErrorPathIntoChildPipeline(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "child.dot"), []byte(`digraph child {
		start [shape=Mdiamond]; build [prompt="build"]; exit [shape=Msquare]; start -> build -> exit }`), 0o644))
	mock, err := agent.ParseMock([]byte(`{"build":[{"status":"fail","notes":"compile error"}]}`))
	require.NoError(t, err)
	g := switchyard.New("parent").Node("manage", graph.KV{"shape": "house", "stack.child_dotfile": "child.dot", "manager.poll_interval": "1h"})
	rep, err := switchyard.Run(testCtx(t), g, switchyard.Message{Text: "x"}, switchyard.WithWorkDir(dir),
		switchyard.WithProvider("mock", mock), switchyard.WithDefaultProvider("mock"))
	var re *switchyard.RunError
	require.ErrorAs(t, err, &re)
	require.Equal(t, []string{"manage", "build"}, re.Path)
	require.Contains(t, err.Error(), "failed at node manage/build")
	require.Equal(t, switchyard.RunFail, rep.Status)
}

// TestRunErrorCauseFromChildPipeline: a child pipeline that fails for a
// scheduler cause (its node's max_visits) makes the parent's run error
// wrap the same cause, with the path into the child.
func TestRunErrorCauseFromChildPipeline(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "child.dot"), []byte(`digraph child {
		start [shape=Mdiamond]; build [prompt="build", max_visits=2]; exit [shape=Msquare]
		start -> build; build -> build [weight=10]; build -> exit }`), 0o644))
	g := switchyard.New("parent").Node("manage", graph.KV{"shape": "house", "stack.child_dotfile": "child.dot", "manager.poll_interval": "1h"})
	rep, err := switchyard.Run(testCtx(t), g, switchyard.Message{Text: "x"}, switchyard.WithWorkDir(dir))
	var re *switchyard.RunError
	require.ErrorAs(t, err, &re)
	require.Equal(t, []string{"manage", "build"}, re.Path)
	require.ErrorIs(t, err, scheduler.ErrMaxIterations, "the child's cause goes up: %v", err)
	require.NotErrorIs(t, err, switchyard.ErrNodeFailed)
	require.Equal(t, switchyard.RunFail, rep.Status)
}
