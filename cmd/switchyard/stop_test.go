package main

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/session"
)

// TestStoppedSessionStaysStopped: a session its operator stopped with
// switchyard stop is recorded as stopped (by whom, when), and neither a
// serve --all --takeover standby, nor a serve --all, nor a plain resume
// runs it again; resume --reopen does, deliberately.
func TestStoppedSessionStaysStopped(t *testing.T) {
	srv := brokertest.Start(t, brokertest.Listen("out", "adm"))
	url := srv.ClientURL()
	file, err := filepath.Abs("testdata/queue.dot")
	require.NoError(t, err)
	dir := t.TempDir()
	bin := switchyardBinary(t)
	start := adminProcesses(t, bin, url, dir)
	exit := func(done chan error, log *syncBuffer) error {
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			t.Fatalf("the process did not end: %s", log.String())
		}
		return nil
	}
	watcher, err := nats.Connect(url, nats.Token("adm"))
	require.NoError(t, err)
	defer watcher.Close()
	var wlog syncBuffer
	events := watchEvents(t, watcher, "sy.st.evt.>", &wlog)

	var logsA, logsB, logsC syncBuffer
	_, ownerDone := start(&logsA, "serve", file, "--id", "st")
	events.wait("session.started", "")
	other, otherDone := start(&logsC, "serve", file, "--id", "st2")
	var wlog2 syncBuffer
	events2 := watchEvents(t, watcher, "sy.st2.evt.>", &wlog2)
	events2.wait("session.started", "")
	standby, standbyDone := start(&logsB, "serve", "--all", "--takeover")

	code, out, errOut := cli(t, "stop", "st", "--by", "alice", "--nats", url, "--token", "adm")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "stopped session st")
	require.NoError(t, exit(ownerDone, &logsA), logsA.String()) // its only session stopped

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rec, err := session.ReadStopped(ctx, srv, "st")
	require.NoError(t, err)
	require.NotNil(t, rec)
	require.Equal(t, "alice", rec.By)
	stored, err := session.List(ctx, srv)
	require.NoError(t, err)
	status := map[string]string{}
	for _, s := range stored {
		status[s.ID] = s.Status
	}
	require.Equal(t, map[string]string{"st": "stopped", "st2": "running"}, status)

	// The other session's owner dies: the standby's scan that takes st2
	// over sees st too, and leaves it stopped.
	var wlog3 syncBuffer
	resumed2 := watchEvents(t, watcher, "sy.st2.evt.>", &wlog3) // the taker numbers its events anew
	require.NoError(t, other.Process.Signal(syscall.SIGKILL))
	require.True(t, killed(<-otherDone))
	resumed2.wait("session.resumed", "")
	waitLog(t, &logsB, "resumed session st2 (", 20*time.Second) // said once the resume returns, after its event
	require.NotContains(t, logsB.String(), "resumed session st (")

	// serve --all finds nothing to run: st is stopped, st2 is served.
	code, _, errOut = cli(t, "serve", "--all", "--nats", url, "--token", "adm", "--logs", filepath.Join(dir, "logs"))
	require.Equal(t, 1, code, errOut)
	require.Contains(t, errOut, "no session to serve")
	require.NotContains(t, errOut, "resumed session st (")

	// resume says it was stopped, by whom, and how to run it again.
	code, _, errOut = cli(t, "resume", "st", "--nats", url, "--token", "adm", "--logs", filepath.Join(dir, "logs"))
	require.Equal(t, 1, code, errOut)
	require.Contains(t, errOut, "session st was stopped by alice at ")
	require.Contains(t, errOut, "switchyard resume st --reopen")

	// --reopen runs it again, until it is stopped again.
	var logsD, wlog4 syncBuffer
	// A watcher of its own: the resumed process numbers its events anew.
	reopened := watchEvents(t, watcher, "sy.st.evt.>", &wlog4)
	_, reopenDone := start(&logsD, "resume", "st", "--reopen")
	reopened.wait("session.resumed", "")
	rec, err = session.ReadStopped(ctx, srv, "st")
	require.NoError(t, err)
	require.Nil(t, rec, "reopened")
	code, _, errOut = cli(t, "stop", "st", "--by", "bob", "--nats", url, "--token", "adm")
	require.Equal(t, 0, code, errOut)
	require.NoError(t, exit(reopenDone, &logsD), logsD.String())
	rec, err = session.ReadStopped(ctx, srv, "st")
	require.NoError(t, err)
	require.Equal(t, "bob", rec.By)

	require.NoError(t, standby.Process.Signal(syscall.SIGTERM))
	require.NoError(t, exit(standbyDone, &logsB), logsB.String())
	require.NotContains(t, logsB.String(), "resumed session st (")
}
