package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/clock"
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

// TestSessionExamples serves the reactive examples and uses them as their
// comments say: a cron digest on the injectable clock, outside events from
// the nats CLI, and a team of agents with a human gate answered No, then
// Yes.
func TestSessionExamples(t *testing.T) {
	t.Run("cron-digest", func(t *testing.T) {
		fake := clock.NewFake(time.Date(2026, 11, 23, 9, 30, 0, 0, time.UTC))
		serveClock = fake
		t.Cleanup(func() { serveClock = nil })
		logs := t.TempDir()
		url, _, stderr := servedFile(t, "../../examples/cron-digest.dot", "digest", "--logs", logs)
		events := adminEvents(t, url, "digest", stderr)
		for i, note := range []string{"deploy 1.4 went out", "the flaky test is fixed"} {
			code, _, errOut := cli(t, "pub", "digest", "note", note, "--nats", url, "--token", "out")
			require.Equal(t, 0, code, errOut)
			events.wait("node.completed", "note")
			if i == 0 {
				// The gate says once that it waits for the hour, not at
				// every note it holds.
				events.wait("gate.waiting", "digest")
			}
			// The note waits on its edge for the hour: explain counts it.
			held := fmt.Sprintf("held=%d", i+1)
			deadline := time.Now().Add(20 * time.Second)
			for {
				code, out, errOut := cli(t, "explain", "digest", "digest", "--nats", url, "--token", "out")
				require.Equal(t, 0, code, errOut)
				if strings.Contains(out, held) {
					break
				}
				require.True(t, time.Now().Before(deadline), "explain never said %s:\n%s", held, out)
				time.Sleep(20 * time.Millisecond) // polling a command's output
			}
		}
		require.Equal(t, 1, events.count("gate.waiting", "digest"), "one gate.waiting for the hour's wait")
		require.Zero(t, events.count("node.completed", "digest"), "nothing before the hour")
		for hour := 0; hour < 3; hour++ {
			fake.Advance(time.Hour)
			ev := events.wait("node.completed", "digest")
			require.Equal(t, "success", ev.Status)
			if hour == 0 {
				prompt, err := os.ReadFile(filepath.Join(logs, "digest", "digest", "prompt.md"))
				require.NoError(t, err)
				require.Contains(t, string(prompt), "one line each:\ndeploy 1.4 went out\n\nthe flaky test is fixed", "one digest of both notes")
			}
		}
		require.Zero(t, events.count("stall.detected", ""), "hourly ticks are never a stall")
		require.Zero(t, events.count("node.refused", ""))
	})

	t.Run("outside-events", func(t *testing.T) {
		work := t.TempDir()
		url, _, stderr := servedFile(t, "../../examples/outside-events.dot", "alerts", "--workdir", work)
		events := adminEvents(t, url, "alerts", stderr)
		natsCLI(t, "--server", url, "--token", "out", "pub", "sy.alerts.node.triage.in", `{"payload":{"message":"disk full on db-1"}}`)
		events.wait("node.completed", "triage")
		require.Equal(t, "success", events.wait("node.completed", "record").Status)
		log, err := os.ReadFile(filepath.Join(work, "alerts.log"))
		require.NoError(t, err)
		require.Contains(t, string(log), "disk full on db-1", "the alert's text reached the agent and its verdict the tool")
		natsCLI(t, "--server", url, "--token", "out", "pub", "sy.alerts.node.nosuch.in", `{"payload":{"message":"lost?"}}`)
		require.Contains(t, events.wait("envelope.rejected", "").Message, "no node nosuch in session alerts")
	})

	t.Run("team", func(t *testing.T) {
		url, _, stderr := servedFile(t, "../../examples/team.dot", "team")
		events := adminEvents(t, url, "team", stderr)
		code, _, errOut := cli(t, "pub", "team", "plan", "add a --version flag", "--nats", url, "--token", "out")
		require.Equal(t, 0, code, errOut)
		events.wait("node.completed", "plan")
		events.wait("node.completed", "code")
		events.wait("human.question", "review")

		code, _, errOut = cli(t, "answer", "team", "review", "maybe", "--nats", url, "--token", "adm")
		require.Equal(t, 2, code, "an answer that matches no option")
		require.Contains(t, errOut, `"maybe" matches no option of human gate review: choose one of [Y] Yes (ship), [N] No, rework (code)`)

		code, _, errOut = cli(t, "answer", "team", "review", "N", "--nats", url, "--token", "adm")
		require.Equal(t, 0, code, errOut)
		events.wait("node.completed", "review")
		rework := events.wait("node.completed", "code")
		require.Equal(t, "success", rework.Status)
		events.wait("human.question", "review")
		require.Zero(t, events.count("node.started", "ship"), "No runs only the No branch")

		code, _, errOut = cli(t, "answer", "team", "review", "Y", "--nats", url, "--token", "adm")
		require.Equal(t, 0, code, errOut)
		require.Equal(t, "success", events.wait("node.completed", "ship").Status)
		require.Equal(t, 2, events.count("node.completed", "code"), "Yes does not send it back to the coder")
	})
}

// adminEvents follows a served session's events with the admin credential.
func adminEvents(t *testing.T, url, session string, log *syncBuffer) *eventWaiter {
	t.Helper()
	nc, err := nats.Connect(url, nats.Token("adm"))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return watchEvents(t, nc, "sy."+session+".evt.>", log)
}
