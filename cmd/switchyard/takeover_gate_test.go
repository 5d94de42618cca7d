package main

import (
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/brokertest"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// TestTakeoverKeepsCronAndGate: the owner of a session with a cron node
// and a waiting human gate is SIGKILLed; a serve --takeover standby,
// started once a tick fell due with nobody owning the session, takes it
// over. The cron node fires on the new owner, once per tick (no tick's
// firing is reported twice) — the ticks missed meanwhile once, late
// (cron.late) —, and the gate asked before the kill is still answerable
// there: its answer runs the chosen branch only.
func TestTakeoverKeepsCronAndGate(t *testing.T) {
	srv := brokertest.Start(t, brokertest.Listen("out", "adm"))
	url := srv.ClientURL()
	file, err := filepath.Abs("testdata/cron-gate.dot")
	require.NoError(t, err)
	dir := t.TempDir()
	bin := switchyardBinary(t)
	start := adminProcesses(t, bin, url, dir)
	watcher, err := nats.Connect(url, nats.Token("adm"))
	require.NoError(t, err)
	defer watcher.Close()
	var wlog syncBuffer
	before := watchEvents(t, watcher, "sy.cg.evt.>", &wlog)

	var logsA, logsB syncBuffer
	owner, ownerDone := start(&logsA, "serve", file, "--id", "cg")
	before.wait("session.started", "")
	before.wait("node.completed", "tick")
	code, _, errOut := cli(t, "pub", "cg", "ask", "ship it?", "--nats", url, "--token", "out")
	require.Equal(t, 0, code, errOut)
	before.wait("human.question", "ask")

	require.NoError(t, owner.Process.Signal(syscall.SIGKILL))
	require.True(t, killed(<-ownerDone))
	// The scenario, not a synchronisation: a tick (every second) falls
	// due while nobody owns the session. A standby already running took
	// a dead owner's session over at its next scan, at once on the same
	// host, and when that came before the next tick nothing was missed
	// (the test failed once that way, waiting for cron.late).
	<-time.After(1500 * time.Millisecond)
	var wlog2 syncBuffer
	after := watchEvents(t, watcher, "sy.cg.evt.>", &wlog2) // the taker numbers its events anew
	standby, standbyDone := start(&logsB, "serve", "--all", "--takeover")
	after.wait("session.resumed", "")
	// The ticks due while nobody owned the session are not skipped: the
	// latest fires once, late.
	lateEv := after.wait("cron.late", "tick")
	late := map[string]string{}
	for _, kv := range lateEv.GetAttrs() {
		late[kv.GetKey()] = kv.GetValue()
	}
	scheduled, err := time.Parse(time.RFC3339, late["scheduled"])
	require.NoError(t, err)
	t.Logf("the tick of %s fired %v late, for %s missed", late["scheduled"],
		lateEv.GetTime().AsTime().Sub(scheduled).Round(time.Millisecond), late["missed"])
	require.Equal(t, "true", late["late"])
	missed, err := strconv.Atoi(late["missed"])
	require.NoError(t, err)
	require.GreaterOrEqual(t, missed, 1, "%v", late)
	for range 3 {
		after.wait("node.completed", "tick")
	}
	require.Contains(t, logsB.String(), "resumed session cg (")

	code, _, errOut = cli(t, "answer", "cg", "ask", "N", "--nats", url, "--token", "adm")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "success", after.wait("node.completed", "no").Status)
	after.wait("node.completed", "tick") // still ticking after the answer

	require.NoError(t, standby.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-standbyDone:
		require.NoError(t, err, logsB.String())
	case <-time.After(30 * time.Second):
		t.Fatal("the standby did not stop")
	}
	// Once per tick: the session's firings are numbered across the
	// takeover (the journal's count), and no tick firing's number is
	// reported twice by the two processes (before sees both).
	attempts := map[string]int{}
	before.count("", "") // drain
	for _, ev := range before.seen {
		if ev.Kind == "node.started" && ev.Node == "tick" {
			attempts[firingOf(ev)]++
		}
		require.False(t, ev.Kind == "node.started" && ev.Node == "yes", "the Yes branch never runs")
	}
	for id, n := range attempts {
		require.Equal(t, 1, n, "tick attempt %s", id)
	}
	require.GreaterOrEqual(t, len(attempts), 4)
	t.Logf("tick fired %d times, each once", len(attempts))
}

func firingOf(ev *pb.Event) string {
	for _, kv := range ev.Attrs {
		if kv.Key == "firing" {
			return kv.Value
		}
	}
	return ""
}
