package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
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

// externalPoolConf is docs/security.md's configuration of an external
// server with one user per pool (and the runtime's user), as an operator
// would write it.
const externalPoolConf = `
listen: 127.0.0.1:-1
jetstream {store_dir: %q}
authorization {
  users = [
    {user: runtime, password: "rt"}
    {user: worker_gpu, password: "g", permissions: {
      publish: {allow: [
        "$JS.API.STREAM.INFO.SY_WORK", "$JS.API.STREAM.INFO.SYW_OUTCOMES",
        "$JS.API.CONSUMER.INFO.SY_WORK.pool_gpu",
        "$JS.API.CONSUMER.MSG.NEXT.SY_WORK.pool_gpu", "$JS.ACK.SY_WORK.pool_gpu.>",
        "$JS.API.STREAM.INFO.KV_sy_work_graphs", "$JS.API.STREAM.MSG.GET.KV_sy_work_graphs",
        "$JS.API.DIRECT.GET.KV_sy_work_graphs.>", "syo.>"]}
      subscribe: {allow: ["syr.gpu.>", "_INBOX_gpu.>"]}
      allow_responses: {max: 1, expires: "10m"}
    }}
    {user: worker_cpu, password: "c", permissions: {
      publish: {allow: [
        "$JS.API.STREAM.INFO.SY_WORK", "$JS.API.STREAM.INFO.SYW_OUTCOMES",
        "$JS.API.CONSUMER.INFO.SY_WORK.pool_cpu",
        "$JS.API.CONSUMER.MSG.NEXT.SY_WORK.pool_cpu", "$JS.ACK.SY_WORK.pool_cpu.>",
        "$JS.API.STREAM.INFO.KV_sy_work_graphs", "$JS.API.STREAM.MSG.GET.KV_sy_work_graphs",
        "$JS.API.DIRECT.GET.KV_sy_work_graphs.>", "syo.>"]}
      subscribe: {allow: ["syr.cpu.>", "_INBOX_cpu.>"]}
      allow_responses: {max: 1, expires: "10m"}
    }}
  ]
}
`

// TestPoolUsersOnExternalServer: docs/security.md's nats-server
// configuration with a user per pool. The worker of pool cpu (its user,
// its inbox prefix) runs cpu's jobs; gpu's user is refused them.
func TestPoolUsersOnExternalServer(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "server.conf")
	require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf(externalPoolConf, filepath.Join(dir, "js"))), 0o600))
	opts, err := server.ProcessConfigFile(conf)
	require.NoError(t, err)
	opts.NoSigs, opts.NoLog = true, true
	srv, err := server.NewServer(opts)
	require.NoError(t, err)
	srv.Start()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	require.True(t, srv.ReadyForConnections(10*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := broker.Start(ctx, broker.Config{URL: srv.ClientURL(), User: "runtime", Password: "rt"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })

	src := `digraph W { start [shape=Mdiamond]; work [shape=parallelogram, pool=cpu, tool_command="echo worked"]; exit [shape=Msquare]; start -> work -> exit }`
	s, _ := startPoolSession(t, b, src)
	worker := func(pool, user, password string) *workerProc {
		cmd := exec.Command(switchyardBinary(t), "worker", "--nats", srv.ClientURL(), "--pool", "cpu",
			"--user", user, "--password", password, "--inbox-prefix", "_INBOX_"+pool)
		return runWorkerProc(t, cmd)
	}
	wrong := worker("gpu", "worker_gpu", "g")
	select {
	case <-wrong.done:
	case <-time.After(30 * time.Second):
		wrong.kill()
		t.Fatalf("gpu's user went on serving pool cpu:\n%s", wrong.String())
	}
	require.Contains(t, wrong.String(), "permission denied: this credential may not serve pool cpu's jobs")

	right := worker("cpu", "worker_cpu", "c")
	right.waitLine(t, 30*time.Second, "job done", "status=success")
	rep, err := s.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status, rep.Reason)
	require.Contains(t, rep.Node("work").Output, "worked")
}
