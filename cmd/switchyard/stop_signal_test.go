package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/brokertest"
)

// TestSecondSignalQuitsAtOnce: serve stops gracefully at SIGTERM — which,
// with its NATS server gone, waits on the server (its lease, its
// connection's drain) — and a second SIGTERM ends it at once.
func TestSecondSignalQuitsAtOnce(t *testing.T) {
	bin := switchyardBinary(t)
	b := brokertest.Start(t, brokertest.Listen("out", "adm"))
	dir := t.TempDir()
	file := filepath.Join(dir, "s.dot")
	require.NoError(t, os.WriteFile(file, []byte(`digraph s { kind="session"; a [prompt="a"] }`), 0o644))
	var stderr syncBuffer
	cmd := exec.Command(bin, "serve", file, "--id", "sig", "--nats", b.ClientURL(), "--token", "adm", "--logs", filepath.Join(dir, "logs"))
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	waitLog(t, &stderr, "serving "+file+" as session sig", 20*time.Second)
	waitLog(t, &stderr, "outside clients connect to", 20*time.Second) // serve's loop: its signal is heard at once

	require.NoError(t, b.Close()) // the server goes away for good
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	waitLog(t, &stderr, "stopping:", 20*time.Second)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-exited:
		var ee *exec.ExitError
		require.ErrorAs(t, waitErr, &ee, "serve ended by the second signal: %s", stderr.String())
		require.Contains(t, ee.String(), "terminated", stderr.String())
	case <-time.After(5 * time.Second):
		t.Fatalf("the second SIGTERM did not end serve: %s", stderr.String())
	}
	require.True(t, strings.Contains(stderr.String(), "a second Ctrl-C or SIGTERM quits at once"), stderr.String())
}
