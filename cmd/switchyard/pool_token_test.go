package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/internal/brokertest"
)

// TestPoolTokens: serve --pool-token gives each pool its own worker
// credential. A worker of pool cpu started with gpu's token is refused
// cpu's jobs and says so; the worker with cpu's token runs them.
func TestPoolTokens(t *testing.T) {
	b := brokertest.Start(t, brokertest.Listen("outside", "admin"),
		brokertest.Configure(func(c *broker.Config) { c.PoolTokens = map[string]string{"cpu": "cpu-tok", "gpu": "gpu-tok"} }))
	src := `digraph W { start [shape=Mdiamond]; work [shape=parallelogram, pool=cpu, tool_command="echo worked"]; exit [shape=Msquare]; start -> work -> exit }`
	s, _ := startPoolSession(t, b, src)

	wrong := startWorker(t, b, "gpu-tok", "--pool", "cpu")
	select {
	case <-wrong.done:
	case <-time.After(30 * time.Second):
		wrong.kill()
		t.Fatalf("a worker with gpu's token went on serving pool cpu:\n%s", wrong.String())
	}
	err := wrong.cmd.Wait()
	require.Error(t, err)
	require.Contains(t, wrong.String(), "permission denied: this credential may not serve pool cpu's jobs")

	right := startWorker(t, b, "cpu-tok", "--pool", "cpu")
	right.waitLine(t, 30*time.Second, "job done", "status=success")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := s.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status, rep.Reason)
	require.Contains(t, rep.Node("work").Output, "worked")
}

func TestPoolTokenFlags(t *testing.T) {
	for _, v := range []string{"gpu", "gpu=", "g.pu=x", "=x"} {
		code, _, errOut := cli(t, "serve", "testdata/queue.dot", "--pool-token", v)
		require.Equal(t, 2, code, "%s: %s", v, errOut)
		require.Contains(t, errOut, "--pool-token")
	}
	code, _, errOut := cli(t, "serve", "testdata/queue.dot", "--pool-token", "gpu=a", "--pool-token", "gpu=b")
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, "pool gpu given twice")
}
