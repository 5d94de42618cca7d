package main

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/internal/brokertest"
)

// TestServeEditCronTLS serves a session over a TLS listener with a cron
// node on an injected clock, then edits it live with `switchyard edit`:
// an invalid file is refused and changes nothing; a valid one adds a node
// and removes another; `sessions` shows the version.
func TestServeEditCronTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := brokertest.SelfSigned(t, dir)
	v1 := filepath.Join(dir, "v1.dot")
	require.NoError(t, os.WriteFile(v1, []byte(`digraph ops {
		tick [trigger=schedule, schedule="*/5 * * * *", prompt="look around"]
		report [prompt="report"]
		old [prompt="old"]
		tick -> report
		tick -> old
	}`), 0o644))
	v2 := filepath.Join(dir, "v2.dot")
	require.NoError(t, os.WriteFile(v2, []byte(`digraph ops {
		tick [trigger=schedule, schedule="*/5 * * * *", prompt="look around"]
		report [prompt="report", max_visits=50]
		neu [prompt="new"]
		tick -> report
		tick -> neu
	}`), 0o644))
	bad := filepath.Join(dir, "bad.dot")
	require.NoError(t, os.WriteFile(bad, []byte("digraph ops {\n  tick [trigger=schedule]\n}\n"), 0o644))

	fake := clock.NewFake(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	serveClock = fake
	t.Cleanup(func() { serveClock = nil })

	addr := freeAddr(t)
	url := "tls://" + addr
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- execute([]string{"serve", v1, "--id", "ops", "--listen", addr, "--token", "out", "--admin-token", "adm",
			"--tls-cert", certFile, "--tls-key", keyFile,
			"--data", filepath.Join(dir, "data"), "--logs", filepath.Join(dir, "logs")}, &stdout, &stderr)
	}()
	admin := []string{"--nats", url, "--token", "adm", "--tls-ca", certFile}
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, out, _ := cli(t, append([]string{"sessions", "--timeout", "300ms"}, admin...)...)
		if code == 0 && strings.Contains(out, "ops") {
			require.Regexp(t, `ops\s+ops\s+1\s+running`, out)
			break
		}
		require.True(t, time.Now().Before(deadline), "serve never listed its session: %s", stderr.String())
	}

	// A client that does not trust the certificate cannot connect.
	_, err := nats.Connect(url, nats.Token("out"))
	require.Error(t, err)
	watcher, err := nats.Connect(url, nats.Token("out"), nats.Secure(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}))
	require.NoError(t, err)
	defer watcher.Close()
	require.True(t, watcher.TLSRequired())
	wait := watchEvents(t, watcher, "sy.ops.evt.>", &stderr).wait
	// The cron node fires when the clock reaches its next time, and its
	// output reaches both downstream nodes.
	tickAt := func() {
		t.Helper()
		require.Eventually(t, func() bool { return fake.Pending() > 0 }, 20*time.Second, time.Millisecond, "the cron timer was never armed")
		fake.Advance(5 * time.Minute)
	}
	tickAt()
	wait("node.completed", "tick")
	wait("node.completed", "report")
	wait("node.completed", "old")

	// An invalid edit changes nothing and says why (line and rule).
	code, _, errOut := cli(t, append([]string{"edit", "ops", bad}, admin...)...)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "bad.dot:2")
	require.Contains(t, errOut, "schedule")
	// Outside users may not edit.
	code, _, _ = cli(t, "edit", "ops", v2, "--nats", url, "--token", "out", "--tls-ca", certFile, "--timeout", "300ms")
	require.Equal(t, 1, code)

	code, out, errOut := cli(t, append([]string{"edit", "ops", v2}, admin...)...)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "version 2: added [neu], removed [old], changed [report]")
	ed := wait("session.edited", "")
	require.Contains(t, ed.Message, "version 2")
	wait("node.removed", "old")
	code, out, _ = cli(t, append([]string{"sessions", "--timeout", "300ms"}, admin...)...)
	require.Equal(t, 0, code)
	require.Regexp(t, `ops\s+ops\s+2\s+running`, out)

	// The next tick reaches the added node, not the removed one.
	tickAt()
	wait("node.completed", "tick")
	wait("node.completed", "neu")

	code, _, errOut = cli(t, append([]string{"stop", "ops", "--timeout", "3s"}, admin...)...)
	require.Equal(t, 0, code, errOut)
	select {
	case code := <-done:
		require.Equal(t, 0, code, stderr.String())
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not exit after its session was stopped")
	}
}
