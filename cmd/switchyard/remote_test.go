package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/nodes/agent"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

// TestExplainAndTrigger drives a running session from the CLI over NATS.
func TestExplainAndTrigger(t *testing.T) {
	b := brokertest.Start(t, brokertest.Listen("outside", "admin"))
	g, diags := graph.Load("s.dot", []byte(`digraph s { kind="session"; m [prompt="m", trigger=manual] }`))
	require.False(t, diags.HasErrors())
	done := make(chan struct{}, 1)
	s, err := session.Start(context.Background(), session.Config{Graph: g, Broker: b,
		Deps: nodes.Deps{Providers: func(string) (agent.Provider, error) { return agent.NewMock(nil), nil }, Interviewer: nodes.NewQueue(nil)},
		Observer: func(ev *pb.Event) {
			if ev.Kind == "node.completed" && ev.Node == "m" {
				done <- struct{}{}
			}
		}})
	require.NoError(t, err)
	defer s.Stop()

	code, out, errOut := cli(t, "explain", s.ID(), "m", "--nats", b.ClientURL(), "--token", "admin")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "m is waiting: manual trigger pending")

	code, _, errOut = cli(t, "trigger", s.ID(), "m", "--nats", b.ClientURL(), "--token", "outside", "--timeout", "300ms")
	require.Equal(t, 1, code, "outside users may not publish on control subjects")
	require.Contains(t, errOut, "permission denied: needs the admin credential")

	code, out, errOut = cli(t, "trigger", s.ID(), "m", "--nats", b.ClientURL(), "--token", "admin")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "triggered m")
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the trigger did not fire m")
	}
	code, _, _ = cli(t, "explain", s.ID(), "m")
	require.Equal(t, 2, code, "--nats is required")
}
