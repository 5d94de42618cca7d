package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// servedFile runs `switchyard serve FILE --id ID --listen` with an admin
// and an outside token, waits until the session is listed and returns the
// URL and serve's outputs. The session is stopped at the end of the test.
func servedFile(t *testing.T, file, id string, extra ...string) (url string, stdout, stderr *syncBuffer) {
	t.Helper()
	dir := t.TempDir()
	addr := freeAddr(t)
	url = "nats://" + addr
	stdout, stderr = &syncBuffer{}, &syncBuffer{}
	done := make(chan int, 1)
	args := append([]string{"serve", file, "--id", id, "--listen", addr, "--token", "out", "--admin-token", "adm",
		"--data", filepath.Join(dir, "data"), "--logs", filepath.Join(dir, "logs")}, extra...)
	go func() { done <- execute(args, stdout, stderr) }()
	t.Cleanup(func() {
		_, _, _ = cli(t, "stop", id, "--nats", url, "--token", "adm", "--timeout", "3s")
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Errorf("serve did not exit: %s", stderr.String())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, out, _ := cli(t, "sessions", "--nats", url, "--token", "adm", "--timeout", "300ms")
		if code == 0 && bytes.Contains([]byte(out), []byte(id)) {
			return url, stdout, stderr
		}
		require.True(t, time.Now().Before(deadline), "serve never listed its session: %s", stderr.String())
	}
}

// TestEventFeedJSON: the pinned nats CLI, with an outside credential,
// reads the session's events as JSON on sy.<session>.json.evt.>, as
// docs/envelope.md shows.
func TestEventFeedJSON(t *testing.T) {
	file := filepath.Join(t.TempDir(), "feed.dot")
	require.NoError(t, os.WriteFile(file, []byte(`digraph feed { kind=session; a [prompt="answer"] }`), 0o644))
	url, serveOut, stderr := servedFile(t, file, "feed")

	sub := exec.Command("go", "tool", "-modfile=../../tools/go.mod", "nats", "--server", url, "--token", "out",
		"sub", "sy.feed.json.evt.node.completed", "--count=1", "--raw")
	var out syncBuffer
	sub.Stdout, sub.Stderr = &out, &out
	require.NoError(t, sub.Start())
	exited := make(chan error, 1)
	go func() { exited <- sub.Wait() }()
	// The CLI subscribes when it is ready: publish until it has one.
	deadline := time.After(60 * time.Second)
	for i, done := 0, false; !done; i++ {
		code, _, errOut := cli(t, "pub", "feed", "a", "hello "+strconv.Itoa(i), "--nats", url, "--token", "out")
		require.Equal(t, 0, code, errOut)
		select {
		case err := <-exited:
			require.NoError(t, err, out.String())
			done = true
		case <-time.After(200 * time.Millisecond): // the next publish, not a synchronisation
		case <-deadline:
			_ = sub.Process.Kill()
			t.Fatalf("nats sub printed nothing: %s\nserve: %s %s", out.String(), stderr.String(), serveOut.String())
		}
	}
	var ev map[string]any
	sc := bufio.NewScanner(bytes.NewReader([]byte(out.String())))
	for sc.Scan() {
		if json.Unmarshal(sc.Bytes(), &ev) == nil {
			break
		}
	}
	require.NotNil(t, ev, "no JSON line in %q", out.String())
	require.Equal(t, "node.completed", ev["kind"])
	require.Equal(t, "feed", ev["session"])
	require.Equal(t, "a", ev["node"])
	require.Equal(t, "success", ev["status"])
	require.NotEmpty(t, ev["time"])
}
