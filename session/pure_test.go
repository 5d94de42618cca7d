package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/session"
)

// TestPureFiringRecordedWithNext: the record of a pure firing (the start
// node's) is not waited for — its output reaches the next node before it
// is stored — and is written with the next firing's record, in one entry;
// the history holds every record. (The record waits for the next one for
// an hour here: a millisecond by default, TestPureFiringRecordedAlone.)
func TestPureFiringRecordedWithNext(t *testing.T) {
	defer session.SetPureLinger(time.Hour)()
	entered, release := make(chan struct{}), make(chan struct{})
	r := newRun(t)
	r.waitFor(entered, release)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := watchJournal(t, r.broker, "$KV."+broker.SharedName+".pure1.journal.>")

	cfg := r.durable(`digraph w { start [shape=Mdiamond]; a [type="custom.wait"]; exit [shape=Msquare]; start -> a -> exit }`, "pure1")
	cfg.Checkpoint = &session.CheckpointPolicy{Retain: true}
	s, err := session.Start(ctx, cfg)
	require.NoError(t, err)
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("a never ran")
	}
	require.Equal(t, 1, w.written(), "entries written before a ran: the input's only, not start's")
	close(release)
	rep, err := s.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status, rep.Reason)
	require.Equal(t, 3, w.written(), "the input's, start's and a's together, exit's")
	require.Equal(t, []string{"", "start", "a", "exit"}, historyNodes(t, r.broker, "pure1"))
}

// team is a reactive session whose first diamond takes outside events,
// whose second is fed by the first, and whose last has no outputs.
const team = `digraph team {
	first [shape=diamond]
	route [shape=diamond]
	ask   [shape=hexagon, label="Deploy?"]
	done  [prompt="deploy"]
	end   [shape=diamond]
	first -> route -> ask
	ask -> done [label="[Y] Yes"]
	done -> end
}`

// TestPureFiringRecordedWithNextInSession: in a reactive session, a
// prompt-less diamond fed by a node of the session is not waited for
// either: its record goes with the next one that is (the human gate's,
// once answered). A pure firing of an outside event (from the work
// stream) is waited for: its input is acknowledged only once a stored
// record consumed it; and so is one with no outputs.
func TestPureFiringRecordedWithNextInSession(t *testing.T) {
	defer session.SetPureLinger(time.Hour)()
	sv := serveSession(t, team, func(c *session.Config) { c.ID, c.Durable, c.LogsDir = "pure2", true, "" })
	w := watchJournal(t, sv.broker, "$KV."+broker.KVName("pure2")+".journal.>")

	sv.pub("first", "build 42 is green")
	sv.wait("human.question", "ask")
	// first's entry is waited for before its input is acknowledged, not
	// before the gate asks: it may reach the watcher after the question.
	w.next()
	require.Equal(t, 0, w.written(), "entries written before the gate was answered: first's, not route's")
	require.Equal(t, []string{"first"}, historyNodes(t, sv.broker, "pure2"))
	require.True(t, sv.answer("ask", "Y").OK)
	// end is pure but has no outputs: nothing would take its record, so
	// it is waited for (node.completed comes once its record is stored).
	sv.wait("node.completed", "end")
	require.Equal(t, []string{"first", "route", "ask", "done", "end"}, historyNodes(t, sv.broker, "pure2"))
}

// TestPureFiringRecordedAlone: a pure firing's record that no record
// waited for follows (the gate asks, and nobody answers) is written alone
// soon all the same: the store does not lag behind the session.
func TestPureFiringRecordedAlone(t *testing.T) {
	sv := serveSession(t, team, func(c *session.Config) { c.ID, c.Durable, c.LogsDir = "pure3", true, "" })
	w := watchJournal(t, sv.broker, "$KV."+broker.KVName("pure3")+".journal.>")

	sv.pub("first", "build 42 is green")
	sv.wait("human.question", "ask")
	w.next() // first's
	w.next() // route's
	require.Equal(t, []string{"first", "route"}, historyNodes(t, sv.broker, "pure3"), "route's record stored while the gate waits")
}
