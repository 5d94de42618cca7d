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

	// serveOnce runs the command (serve, or resume of the stopped session)
	// until switchyard stop ends it.
	serveOnce := func(args ...string) (stop func()) {
		var stdout, stderr syncBuffer
		done := make(chan int, 1)
		go func() {
			done <- execute(append(args, admin...), &stdout, &stderr)
		}()
		deadline := time.Now().Add(20 * time.Second)
		for {
			code, out, _ := cli(t, append([]string{"sessions", "--timeout", "300ms"}, admin...)...)
			if code == 0 && strings.Contains(out, "in") {
				break
			}
			require.True(t, time.Now().Before(deadline), "serve never listed its session: %s", stderr.String())
		}
		return func() {
			code, _, errOut := cli(t, append([]string{"stop", "in", "--timeout", "3s"}, admin...)...)
			require.Equal(t, 0, code, errOut)
			select {
			case code := <-done:
				require.Equal(t, 0, code, stderr.String())
			case <-time.After(20 * time.Second):
				t.Fatal("serve did not exit")
			}
		}
	}

	watcher, err := nats.Connect(url, nats.Token("adm"))
	require.NoError(t, err)
	defer watcher.Close()
	var log syncBuffer
	events := watchEvents(t, watcher, "sy.in.evt.>", &log)

	stop := serveOnce("serve", file, "--id", "in", "--logs", filepath.Join(dir, "logs"))
	code, out, errOut := cli(t, "pub", "in", "a", "first", "--nats", url, "--token", "out")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "(stored: SY_in #")
	events.wait("node.completed", "a")
	stop()

	// Nobody serves the session: the stream still acknowledges.
	code, out, errOut = cli(t, "pub", "in", "a", "while away", "--nats", url, "--token", "out", "--timeout", "500ms")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "(stored: SY_in #")
	require.Contains(t, errOut, "no process serves session in now")
	// The nats CLI as a request gets the acknowledgement as its reply.
	// With an outside credential a client reads replies on its private
	// inbox only: a connection name and the inbox prefix it names.
	name := "docs_example_client_1"
	req := exec.Command("go", "tool", "-modfile=../../tools/go.mod", "nats", "--server", url, "--token", "out",
		"--connection-name", name, "--inbox-prefix", "_INBOX."+name,
		"pub", "--jetstream", "sy.in.node.a.in", `{"kind":"handoff","payload":{"message":"from nats pub"}}`, "-H", "Nats-Msg-Id:cli-1")
	ack, err := req.CombinedOutput()
	require.NoError(t, err, "%s", ack)
	t.Logf("nats pub --jetstream: %s", ack)
	require.Contains(t, string(ack), "SY_in")

	// switchyard stop recorded the session's end: running it again is a
	// deliberate reopen, which takes what was stored meanwhile.
	stop = serveOnce("resume", "in", "--reopen")
	events.wait("node.completed", "a")
	events.wait("node.completed", "a")
	stop()
	require.Equal(t, 3, events.count("node.completed", "a"), "each acknowledged envelope once")
}
