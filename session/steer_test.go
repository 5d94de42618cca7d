package session_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/nodes/agent"
)

// TestManagerSteersChildThroughItsInbox: stack.manager_loop's steer
// reaches the child pipeline as a message into its current node's inbox,
// and the child's next working node reads it as an input.
func TestManagerSteersChildThroughItsInbox(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "child.dot"), []byte(`digraph child {
		start [shape=Mdiamond]; build [type="custom.echo"]; test [type="custom.echo"]; exit [shape=Msquare]
		start -> build -> test -> exit
	}`), 0o644))
	r := newRun(t)
	cfg := r.config(r.load(`digraph parent {
		start [shape=Mdiamond]
		manage [shape=house, stack.child_dotfile="child.dot", manager.poll_interval=1h, manager.actions="observe,steer,wait", manager.steer_prompt="keep going"]
		exit [shape=Msquare]
		start -> manage -> exit
	}`))
	cfg.WorkDir = dir
	// The child's steer.received event says its steer is held.
	held := make(chan struct{}, 1)
	sub, err := r.broker.Conn().Subscribe("sy.*.evt.steer.received", func(*nats.Msg) {
		select {
		case held <- struct{}{}:
		default:
		}
	})
	require.NoError(t, err)
	defer func() { _ = sub.Unsubscribe() }()
	require.NoError(t, r.broker.Conn().Flush())
	var mu sync.Mutex
	inputs := map[string][]string{}
	cfg.Registry = nil
	cfg.Deps = nodes.Deps{Providers: func(string) (agent.Provider, error) { return agent.NewMock(nil), nil }, Interviewer: nodes.NewQueue(nil)}
	cfg.Handlers = map[string]nodes.Handler{"custom.echo": nodes.HandlerFunc(
		func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
			if in.Node.ID == "build" {
				select { // build works until the manager's steer is held
				case <-held:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			mu.Lock()
			for _, m := range in.Messages {
				inputs[in.Node.ID] = append(inputs[in.Node.ID], m.Kind+":"+m.Text)
			}
			mu.Unlock()
			return &nodes.Outcome{Status: nodes.StatusSuccess}, nil
		})}
	rep := r.runConfig(cfg)
	require.Equal(t, "success", rep.Status, rep.Reason)
	mu.Lock()
	defer mu.Unlock()
	// The steer reaches the first working node to fire after it arrived:
	// build when it had not started yet, else test — once.
	var got []string
	for _, node := range []string{"build", "test"} {
		for _, m := range inputs[node] {
			if m == "steer:keep going" {
				got = append(got, node)
			}
		}
	}
	require.Len(t, got, 1, "the steer is read once by the child's next working node: %v", inputs)
	_, err = os.Stat(filepath.Join(r.logs, "children", "child1", "build", "steer.md"))
	require.True(t, os.IsNotExist(err), "no steer.md nobody reads")
}
