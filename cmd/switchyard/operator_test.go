package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/session"
)

// TestOperatorCommandsOnAListener: history, resume and gc reach a served
// listener with a credential like the other remote commands; with the
// outside (user) credential they, sessions and trigger say that the admin
// credential is needed instead of timing out or listing nothing. (explain
// is open to the outside credential: it only reads, docs/security.md.)
func TestOperatorCommandsOnAListener(t *testing.T) {
	b := brokertest.Start(t, brokertest.Listen("outside", "admin"))
	g, diags := graph.Load("p.dot", []byte(`digraph p { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }`))
	require.False(t, diags.HasErrors())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := session.Start(ctx, session.Config{ID: "op1", Graph: g, Broker: b, Durable: true})
	require.NoError(t, err)
	rep, err := s.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status)
	url := b.ClientURL()

	code, out, errOut := cli(t, "history", "op1", "--nats", url, "--token", "admin")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "CHECKPOINT")
	require.Contains(t, out, "success (run)")
	code, out, errOut = cli(t, "gc", "--nats", url, "--token", "admin", "--dry-run", "--retain", "1ns")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "would remove session op1")

	const denied = "permission denied: needs the admin credential"
	for _, args := range [][]string{
		{"history", "op1"},
		{"gc", "--dry-run"},
		{"resume", "op1"},
		{"sessions"},
		{"trigger", "op1", "start"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, out, errOut := cli(t, append(args, "--nats", url, "--token", "outside")...)
			require.Equal(t, 1, code, "stdout: %s\nstderr: %s", out, errOut)
			require.Contains(t, errOut, denied)
		})
	}

	// The TLS flag reaches the connection.
	code, _, errOut = cli(t, "history", "op1", "--nats", url, "--token", "admin", "--tls-ca", filepath.Join(t.TempDir(), "missing.pem"))
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "missing.pem")
}

// TestServeWarnsWithoutAdminToken: a listener with only the outside
// credential serves, but says that no one can answer, trigger or stop.
func TestServeWarnsWithoutAdminToken(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "s.dot")
	require.NoError(t, os.WriteFile(file, []byte(`digraph s { a [prompt="x"] }`), 0o644))
	cmd := exec.Command(switchyardBinary(t), "serve", file, "--listen", freeAddr(t), "--token", "out",
		"--data", filepath.Join(dir, "data"), "--logs", filepath.Join(dir, "logs"))
	cmd.Env = append(os.Environ(), "SWITCHYARD_ADMIN_TOKEN=")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "serve ended without the warning")
			if strings.Contains(l, "warning: no --admin-token") {
				require.Contains(t, l, "no one can answer, trigger, stop or edit these sessions")
				_ = cmd.Process.Kill()
				for range lines { // drain until the pipe closes
				}
				return
			}
		case <-timeout:
			t.Fatal("serve printed no warning")
		}
	}
}
