package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/clock"
)

// TestServeOneRunner serves a session with a cron node, then starts other
// runners of the same session: a second serve in this process, a serve in
// another process, resume, and serve --all. Each is refused with who runs
// the session; the cron node fires once per tick.
func TestServeOneRunner(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "cron.dot")
	require.NoError(t, os.WriteFile(file, []byte(`digraph cron {
		tick [trigger=schedule, schedule="*/5 * * * *", prompt="look around"]
		report [prompt="report"]
		tick -> report
	}`), 0o644))
	bin := switchyardBinary(t)
	// The other process judges the lease on its real clock: this one's
	// fake clock runs ahead of it, so the lease it writes is current there.
	fake := clock.NewFake(time.Now().Add(time.Hour).UTC())
	serveClock = fake
	t.Cleanup(func() { serveClock = nil })

	addr := freeAddr(t)
	url := "nats://" + addr
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- execute([]string{"serve", file, "--id", "ops", "--listen", addr, "--token", "out", "--admin-token", "adm",
			"--data", filepath.Join(dir, "data"), "--logs", filepath.Join(dir, "logs")}, &stdout, &stderr)
	}()
	admin := []string{"--nats", url, "--token", "adm"}
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, out, _ := cli(t, append([]string{"sessions", "--timeout", "300ms"}, admin...)...)
		if code == 0 && strings.Contains(out, "ops") {
			break
		}
		require.True(t, time.Now().Before(deadline), "serve never listed its session: %s", stderr.String())
	}
	host, _ := os.Hostname()
	held := "session ops is served by " + host + " pid "

	// Another process: the lease names a live process of this host.
	octx, ocancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ocancel()
	other := exec.CommandContext(octx, bin, append([]string{"serve", file, "--id", "ops", "--logs", filepath.Join(dir, "logs2")}, admin...)...)
	out, err := other.CombinedOutput()
	require.Error(t, err, "a second serve of the session in another process is refused: %s", out)
	require.Contains(t, string(out), held)
	require.Equal(t, 1, other.ProcessState.ExitCode())

	// A second serve in this process, resume, and serve --all.
	code, _, errOut := cli(t, append([]string{"serve", file, "--id", "ops", "--logs", filepath.Join(dir, "logs3")}, admin...)...)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, held)
	code, _, errOut = cli(t, append([]string{"resume", "ops"}, admin...)...)
	require.Equal(t, 1, code, errOut)
	require.Contains(t, errOut, held)
	code, _, errOut = cli(t, append([]string{"serve", "--all"}, admin...)...)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "session ops is not resumed: "+held)
	require.Contains(t, errOut, "no session to serve")

	watcher, err := nats.Connect(url, nats.Token("adm"))
	require.NoError(t, err)
	defer watcher.Close()
	events := watchEvents(t, watcher, "sy.ops.evt.>", &stderr)
	for range 3 {
		require.Eventually(t, func() bool { return fake.Pending() > 0 }, 20*time.Second, time.Millisecond, "the cron timer was never armed")
		fake.Advance(5 * time.Minute)
		events.wait("node.completed", "tick")
		events.wait("node.completed", "report")
	}
	code, _, errOut = cli(t, append([]string{"stop", "ops", "--timeout", "3s"}, admin...)...)
	require.Equal(t, 0, code, errOut)
	select {
	case code := <-done:
		require.Equal(t, 0, code, stderr.String())
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not exit after its session was stopped")
	}
	require.Equal(t, 3, events.count("node.started", "tick"), "one firing per tick")
	require.Equal(t, 3, events.count("node.completed", "report"))
}
