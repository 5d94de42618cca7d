package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/brokertest"
)

// TestPubDurable publishes into a durable session on a NATS server of its
// own: pub waits for the stream's acknowledgement (and the session's
// verdict); while no process serves the session, an acknowledged envelope
// is stored and reaches its node when the session is served again; the
// nats CLI gets the same acknowledgement with a request. The session was
// ended with switchyard stop, so it runs again through resume --reopen.
func TestPubDurable(t *testing.T) {
	srv := brokertest.Start(t, brokertest.Listen("out", "adm"))
	url := srv.ClientURL()
	dir := t.TempDir()
	file := filepath.Join(dir, "in.dot")
	require.NoError(t, os.WriteFile(file, []byte(`digraph in { kind=session; a [prompt="answer"] }`), 0o644))
	admin := []string{"--nats", url, "--token", "adm"}

	watcher, err := nats.Connect(url, nats.Token("adm"))
	require.NoError(t, err)
	defer watcher.Close()
	var log syncBuffer
	events := watchEvents(t, watcher, "sy.in.evt.>", &log)

	stop := serveOnce(t, "in", admin, "serve", file, "--id", "in", "--logs", filepath.Join(dir, "logs"))
	code, out, errOut := cli(t, "pub", "in", "a", "first", "--nats", url, "--token", "out")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "(stored: SY_in #")
	events.wait("node.completed", "a")
	// The nats CLI on an inbox the session does not have: a request
	// (nats req) and a JetStream publish (nats pub --jetstream) get the
	// session's refusal with the reason, not the stream's acknowledgement.
	name := "docs_example_client_1"
	natsCLI := func(args ...string) *exec.Cmd {
		return exec.Command("go", append([]string{"tool", "-modfile=../../tools/go.mod", "nats", "--server", url, "--token", "out",
			"--connection-name", name, "--inbox-prefix", "_INBOX." + name}, args...)...)
	}
	reply, err := natsCLI("req", "sy.in.node.ghost.in", `{"payload":{"message":"boo"}}`).CombinedOutput()
	require.NoError(t, err, "%s", reply)
	t.Logf("nats req on an unknown inbox: %s", reply)
	require.Contains(t, string(reply), `"description":"no node ghost in session in (its nodes: a)"`)
	reply, err = natsCLI("pub", "--jetstream", "sy.in.node.ghost.in", `{"payload":{"message":"boo"}}`).CombinedOutput()
	require.Error(t, err, "%s", reply)
	t.Logf("nats pub --jetstream on an unknown inbox: %s", reply)
	require.Contains(t, string(reply), "no node ghost in session in")
	require.NotContains(t, string(reply), "SY_in")
	events.wait("envelope.rejected", "")
	stop()

	// Nobody serves the session: what its graph does not have is stored
	// nowhere.
	code, _, errOut = cli(t, "pub", "in", "ghost", "boo", "--nats", url, "--token", "out", "--timeout", "500ms", "--retry-for", "3s")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "no session in on "+url+" (nothing answered on sy.in.node.ghost.in for 3s")

	// Nobody serves the session: the stream still acknowledges.
	code, out, errOut = cli(t, "pub", "in", "a", "while away", "--nats", url, "--token", "out", "--timeout", "500ms")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "(stored: SY_in #")
	require.Contains(t, errOut, "no process serves session in now")
	// The nats CLI as a request gets the acknowledgement as its reply.
	// With an outside credential a client reads replies on its private
	// inbox only: a connection name and the inbox prefix it names.
	ack, err := natsCLI("pub", "--jetstream", "sy.in.node.a.in", `{"kind":"handoff","payload":{"message":"from nats pub"}}`,
		"-H", "Nats-Msg-Id:cli-1").CombinedOutput()
	require.NoError(t, err, "%s", ack)
	t.Logf("nats pub --jetstream: %s", ack)
	require.Contains(t, string(ack), "SY_in")

	// switchyard stop recorded the session's end: running it again is a
	// deliberate reopen, which takes what was stored meanwhile.
	stop = serveOnce(t, "in", admin, "resume", "in", "--reopen")
	events.wait("node.completed", "a")
	events.wait("node.completed", "a")
	stop()
	require.Equal(t, 3, events.count("node.completed", "a"), "each acknowledged envelope once")
}

// serveOnce runs a serve command (serve, or resume of a stopped session)
// with the admin connection flags until it lists session id, and returns
// what ends it: switchyard stop, then serve's exit 0.
func serveOnce(t *testing.T, id string, admin []string, args ...string) (stop func()) {
	t.Helper()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- execute(append(args, admin...), &stdout, &stderr) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, out, _ := cli(t, append([]string{"sessions", "--timeout", "300ms"}, admin...)...)
		if code == 0 && strings.Contains(out, id) {
			break
		}
		require.True(t, time.Now().Before(deadline), "serve never listed its session: %s", stderr.String())
	}
	return func() {
		t.Helper()
		code, _, errOut := cli(t, append([]string{"stop", id, "--timeout", "3s"}, admin...)...)
		require.Equal(t, 0, code, errOut)
		select {
		case code := <-done:
			require.Equal(t, 0, code, stderr.String())
		case <-time.After(20 * time.Second):
			t.Fatal("serve did not exit")
		}
	}
}
