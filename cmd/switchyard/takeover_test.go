package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/session"
)

// TestTakeoverAfterKill: two serve processes on one NATS server, the
// second with --all --takeover. The owner of a session is killed with
// SIGKILL while envelopes arrive; the standby resumes the session from its
// JetStream state within the lease's TTL, and every acknowledged envelope
// fires the node exactly once.
func TestTakeoverAfterKill(t *testing.T) {
	srv := brokertest.Start(t, brokertest.Listen("out", "adm"))
	url := srv.ClientURL()
	file, err := filepath.Abs("testdata/queue.dot")
	require.NoError(t, err)
	dir := t.TempDir()
	bin := switchyardBinary(t)
	var logsA, logsB syncBuffer
	start := adminProcesses(t, bin, url, dir)
	watcher, err := nats.Connect(url, nats.Token("adm"))
	require.NoError(t, err)
	defer watcher.Close()
	var wlog syncBuffer
	events := watchEvents(t, watcher, "sy.tk.evt.>", &wlog)

	owner, ownerDone := start(&logsA, "serve", file, "--id", "tk")
	events.wait("session.started", "")
	standby, standbyDone := start(&logsB, "serve", "--all", "--takeover")
	pub := func(from, to int) {
		for i := from; i < to; i++ {
			code, _, errOut := cli(t, "pub", "tk", "work", "m"+strconv.Itoa(i), "--edge", "src:work", "--nats", url, "--token", "out")
			require.Equal(t, 0, code, errOut)
		}
	}
	pub(0, 10)
	for range 10 {
		events.wait("node.completed", "work")
	}
	// The standby leaves a live owner's session alone.
	require.NotContains(t, logsB.String(), "resumed session tk")

	require.NoError(t, owner.Process.Signal(syscall.SIGKILL))
	killedAt := time.Now()
	require.True(t, killed(<-ownerDone))
	pub(10, 20) // acknowledged by the stream while nobody serves the session
	events.wait("session.resumed", "")
	took := time.Since(killedAt)
	for range 10 {
		events.wait("node.completed", "work")
	}
	require.Contains(t, logsB.String(), "resumed session tk")
	t.Logf("the standby took the session over %v after the owner's SIGKILL", took.Round(time.Millisecond))
	require.Less(t, took, session.DefaultLeaseTTL, "within the lease's TTL")

	require.NoError(t, standby.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-standbyDone:
		require.NoError(t, err, logsB.String())
	case <-time.After(30 * time.Second):
		t.Fatal("the standby did not stop")
	}
	require.Equal(t, 20, events.count("node.completed", "work"), "each envelope fired once")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hist, err := session.History(ctx, srv, "tk")
	require.NoError(t, err)
	consumed := map[string]int{}
	for _, h := range hist {
		if h.Node == "work" {
			for _, id := range h.ConsumedIDs {
				consumed[id]++
			}
		}
	}
	require.Len(t, consumed, 20)
	for id, n := range consumed {
		require.Equal(t, 1, n, id)
	}
}

// adminProcesses returns a starter of switchyard processes (serve, resume,
// a standby...) on the NATS server at url with the admin token "adm" and
// the run directories under dir: each is a real child process, its stderr
// in log, killed (and waited for) when the test ends; done receives its exit.
func adminProcesses(t *testing.T, bin, url, dir string) func(log *syncBuffer, args ...string) (*exec.Cmd, chan error) {
	return func(log *syncBuffer, args ...string) (*exec.Cmd, chan error) {
		cmd := exec.Command(bin, append(args, "--nats", url, "--token", "adm", "--logs", filepath.Join(dir, "logs"))...)
		cmd.Stderr = log
		require.NoError(t, cmd.Start())
		done, exited := make(chan error, 1), make(chan struct{})
		go func() { done <- cmd.Wait(); close(exited) }()
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
		return cmd, done
	}
}
