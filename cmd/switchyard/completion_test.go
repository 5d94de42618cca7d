package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// complete runs the shell's completion request (what the scripts of
// `switchyard completion bash` run) and returns the candidates.
func complete(t *testing.T, args ...string) []string {
	t.Helper()
	code, out, errOut := cli(t, append([]string{"__complete"}, args...)...)
	require.Equal(t, 0, code, errOut)
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" || strings.HasPrefix(line, ":") {
			continue // the directive
		}
		got = append(got, line)
	}
	return got
}

// TestCompletionOfSessionsAndNodes: the ids of the sessions served on a
// server, then the node ids of the chosen session's graph, filtered by
// what was typed; durable sessions of the store for history and resume.
func TestCompletionOfSessionsAndNodes(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "chat.dot", `digraph chat {
		answer [prompt="answer the question"]
		summarise [prompt="summarise"]
		archive [prompt="archive"]
		answer -> summarise -> archive
	}`)
	addr := freeAddr(t)
	url := "nats://" + addr
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- execute([]string{"serve", file, "--id", "s1", "--listen", addr, "--token", "out", "--admin-token", "adm",
			"--data", filepath.Join(dir, "data"), "--logs", filepath.Join(dir, "logs")}, &stdout, &stderr)
	}()
	conn := []string{"--nats", url, "--token", "adm"}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if got := complete(t, append([]string{"explain"}, append(conn, "")...)...); len(got) > 0 {
			require.Equal(t, []string{"s1\tchat (running)"}, got, "the session, described by its graph")
			break
		}
		require.True(t, time.Now().Before(deadline), "serve never listed its session: %s", stderr.String())
	}
	require.Equal(t, []string{"answer", "archive", "summarise"}, complete(t, append([]string{"explain", "s1"}, append(conn, "")...)...))
	require.Equal(t, []string{"answer", "archive"}, complete(t, append([]string{"pub", "s1"}, append(conn, "a")...)...), "filtered by the prefix")
	require.Empty(t, complete(t, append([]string{"trigger", "s1"}, append(conn, "x")...)...))
	require.Empty(t, complete(t, append([]string{"explain", "nosuch"}, append(conn, "")...)...), "an unknown session has no nodes")
	require.Equal(t, []string{"s1\tchat (running)"}, complete(t, append([]string{"stop"}, append(conn, "s")...)...))
	require.Empty(t, complete(t, append([]string{"stop", "s1"}, append(conn, "")...)...), "stop takes one session")
	require.Empty(t, complete(t, "explain", "--nats", "nats://127.0.0.1:1", ""), "an unreachable server completes nothing")

	code, _, errOut := cli(t, "stop", "s1", "--nats", url, "--token", "adm")
	require.Equal(t, 0, code, errOut)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not exit after its last session stopped")
	}

	// The durable sessions of the store: served s1, and a finished run.
	data := filepath.Join(dir, "data")
	hello, err := os.ReadFile("../../examples/hello.dot")
	require.NoError(t, err)
	code, _, errOut = cli(t, "run", writeFile(t, dir, "hello.dot", string(hello)), "--id", "run1", "--data", data, "--logs", filepath.Join(dir, "runlogs"))
	require.Equal(t, 0, code, errOut)
	got := complete(t, "history", "--data", data, "")
	require.Len(t, got, 2, "%q", got)
	require.True(t, strings.HasPrefix(got[0], "run1\t"), "%q", got)
	require.True(t, strings.HasPrefix(got[1], "s1\t"), "%q", got)
	require.Equal(t, []string{got[0]}, complete(t, "resume", "--data", data, "r"))
}
