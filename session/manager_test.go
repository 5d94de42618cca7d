package session_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/nodes/agent"
	"github.com/switchyard/switchyard/session"
)

// TestManagerLoopRunsChildPipeline runs a stack.manager_loop whose child
// pipeline is a real sub-session on the same broker.
func TestManagerLoopRunsChildPipeline(t *testing.T) {
	for _, tc := range []struct {
		name, childMock, want string
	}{
		{"child succeeds", `{}`, "success"},
		{"child fails", `{"build":[{"status":"fail"}]}`, "fail"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			child := filepath.Join(dir, "child.dot")
			require.NoError(t, os.WriteFile(child, []byte(`digraph child {
				start [shape=Mdiamond]; build [prompt="build"]; test [prompt="test"]; exit [shape=Msquare]
				start -> build -> test -> exit
			}`), 0o644))
			src := `digraph parent {
				start [shape=Mdiamond]
				manage [shape=house, stack.child_dotfile="child.dot", manager.poll_interval=1h, manager.actions="observe,steer,wait", manager.steer_prompt="keep going"]
				exit [shape=Msquare]
				start -> manage -> exit
			}`
			g, diags := graph.Load("parent.dot", []byte(src))
			require.False(t, diags.HasErrors(), "%v", diags)
			mock, err := agent.ParseMock([]byte(tc.childMock))
			require.NoError(t, err)
			r := newRun(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, err := session.Start(ctx, session.Config{
				Graph: g, Broker: r.broker, LogsDir: r.logs, WorkDir: dir, Observer: r.observe,
				Deps: nodes.Deps{Providers: func(string) (agent.Provider, error) { return mock, nil }, Interviewer: nodes.NewQueue(nil)},
			})
			require.NoError(t, err)
			rep, err := s.Wait(ctx)
			require.NoError(t, err)
			require.Equal(t, tc.want, rep.Status, rep.Reason)
			require.Equal(t, 1, mock.Runs("build"), "the child ran its nodes")
			if tc.want == "fail" {
				require.Equal(t, "manage/build", rep.FailedNode, "the failure's path goes down into the child")
				require.Contains(t, rep.Reason, "at node build")
			}
			cp := r.file("checkpoint.json")
			if tc.want == "success" {
				require.Contains(t, cp, `"stack.child.status": "completed"`)
				require.Contains(t, cp, `"stack.child.completed": "4"`)
			}
			_, err = os.Stat(filepath.Join(r.logs, "children", "child1", "checkpoint.json"))
			require.NoError(t, err, "the child keeps its own run directory")
		})
	}
}
