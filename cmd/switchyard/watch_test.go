package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// watch of a session that does not exist fails within its --timeout.
func TestWatchUnknownSessionFails(t *testing.T) {
	_, natsURL, _ := serveHTTP(t, `digraph g { a [prompt="x"] }`)
	start := time.Now()
	code, _, errOut := cli(t, "watch", "nosuch", "--nats", natsURL, "--token", "out", "--timeout", "500ms", "--plain")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "session nosuch did not answer within 500ms")
	require.Less(t, time.Since(start), 10*time.Second, "it gives up, it does not hang")
}

// watch starts with every node's state, a gate waiting for its answer as
// waiting, and follows the session from there.
func TestWatchSnapshotShowsAWaitingGate(t *testing.T) {
	_, natsURL, serveErr := serveHTTP(t, `digraph g {
		draft  [prompt="draft"]
		review [shape=hexagon, label="Publish this draft?"]
		done   [prompt="publish"]
		idle   [prompt="never fed"]
		draft -> review
		review -> done [label="[A] Approve"]
	}`)
	code, _, errOut := cli(t, "pub", "w1", "draft", "go", "--nats", natsURL, "--token", "out")
	require.Equal(t, 0, code, errOut)
	// Wait until the gate asks (explain says so), as a person would.
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, out, _ := cli(t, "explain", "w1", "review", "--nats", natsURL, "--token", "out")
		if code == 0 && strings.Contains(out, "waiting for a person's answer") {
			break
		}
		require.True(t, time.Now().Before(deadline), "the gate never asked: %s", serveErr.String())
		time.Sleep(50 * time.Millisecond) // polling the session's state
	}

	var out, errw syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- execute([]string{"watch", "w1", "--nats", natsURL, "--token", "out", "--plain"}, &out, &errw)
	}()
	waitLog(t, &out, "review  waiting  waiting for an answer: Publish this draft?", 20*time.Second)
	require.Contains(t, out.String(), "idle  idle")
	require.Contains(t, out.String(), "draft  idle")

	code, _, errOut = cli(t, "answer", "w1", "review", "A", "--nats", natsURL, "--token", "adm")
	require.Equal(t, 0, code, errOut)
	waitLog(t, &out, "node.completed  done  success", 20*time.Second)
	code, _, errOut = cli(t, "stop", "w1", "--nats", natsURL, "--token", "adm")
	require.Equal(t, 0, code, errOut)
	select {
	case code := <-done:
		require.Equal(t, 0, code, errw.String())
	case <-time.After(20 * time.Second):
		t.Fatal("watch did not end with the session")
	}
}
