package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/brokertest"
)

// TestPubLargeSession: a durable session past the bound of a listed work
// stream (600 nodes) takes pub's envelopes through the serving session:
// acknowledged by the stream, refused with the reason when its graph does
// not have the node. While no process serves it nothing answers, and pub
// publishes again until a process serves it (a failover, here a reopen):
// the envelope is then acknowledged and reaches its node once.
func TestPubLargeSession(t *testing.T) {
	srv := brokertest.Start(t, brokertest.Listen("out", "adm"))
	url := srv.ClientURL()
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("digraph big { kind=session; ")
	for i := range 600 {
		fmt.Fprintf(&b, "n%d [prompt=\"p\"]; ", i)
		if i > 0 {
			fmt.Fprintf(&b, "n%d -> n%d; ", i-1, i)
		}
	}
	b.WriteString("}")
	file := filepath.Join(dir, "big.dot")
	require.NoError(t, os.WriteFile(file, []byte(b.String()), 0o644))
	admin := []string{"--nats", url, "--token", "adm"}
	watcher, err := nats.Connect(url, nats.Token("adm"))
	require.NoError(t, err)
	defer watcher.Close()
	var log syncBuffer
	events := watchEvents(t, watcher, "sy.big.evt.>", &log)

	stop := serveOnce(t, "big", admin, "serve", file, "--id", "big", "--logs", filepath.Join(dir, "logs"))
	code, out, errOut := cli(t, "pub", "big", "n599", "first", "--nats", url, "--token", "out")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "(stored: SY_big #")
	events.wait("node.completed", "n599")
	code, _, errOut = cli(t, "pub", "big", "ghost", "boo", "--nats", url, "--token", "out")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "no node ghost in session big")
	code, _, errOut = cli(t, "pub", "big", "n599", "boo", "--edge", "n1:n599", "--nats", url, "--token", "out")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "no edge n1:n599 in session big")
	stop()

	// Nobody serves the session: pub waits for it.
	var pubOut, pubErr syncBuffer
	pubDone := make(chan int, 1)
	go func() {
		pubDone <- execute([]string{"pub", "big", "n599", "while away", "--nats", url, "--token", "out", "--timeout", "1s"}, &pubOut, &pubErr)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(pubErr.String(), "nothing answers on sy.big.node.n599.in yet") {
		select {
		case code := <-pubDone:
			t.Fatalf("pub ended while nobody served the session: %d %s", code, pubErr.String())
		case <-time.After(50 * time.Millisecond): // polling pub's output
		}
		require.True(t, time.Now().Before(deadline), "pub never said it waits: %s", pubErr.String())
	}
	stop = serveOnce(t, "big", admin, "resume", "big", "--reopen")
	select {
	case code := <-pubDone:
		require.Equal(t, 0, code, pubErr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("pub still waits: %s", pubErr.String())
	}
	require.Contains(t, pubOut.String(), "(stored: SY_big #")
	events.wait("node.completed", "n599")
	stop()
	require.Equal(t, 2, events.count("node.completed", "n599"), "each acknowledged envelope once")
}
