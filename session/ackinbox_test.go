package session_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/session"
)

// TestAckInboxKeptForTheNextJournal: the inbox a journal's records were
// acknowledged on is kept when its session ends and taken by the next
// session's journal, whose numbering goes on: an acknowledgement that came
// late for the journal before is not taken for one of its own.
func TestAckInboxKeptForTheNextJournal(t *testing.T) {
	r := newRun(t)
	const src = `digraph p { start [shape=Mdiamond]; a [prompt="a"]; b [prompt="b"]; exit [shape=Msquare]; start -> a -> b -> exit }`
	run := func(id string) {
		t.Helper()
		cfg := r.durable(src, id)
		cfg.Checkpoint = &session.CheckpointPolicy{Retain: true}
		rep := r.runConfig(cfg)
		require.Equal(t, "success", rep.Status, rep.Reason)
		require.Equal(t, []string{"", "start", "a", "b", "exit"}, historyNodes(t, r.broker, id), "the history of %s", id)
	}
	run("k1")
	prefixes, next := session.KeptInboxes(r.broker)
	require.Len(t, prefixes, 1, "k1's inbox kept")
	require.NotZero(t, next[0])

	// An acknowledgement of k1's that comes late, naming a sequence no
	// record of k2 has.
	nc, err := r.broker.NewConn()
	require.NoError(t, err)
	defer nc.Close()
	require.NoError(t, nc.Publish(prefixes[0]+strconv.FormatUint(next[0]-1, 10), []byte(`{"stream":"KV_sy_sessions","seq":999999}`)))
	require.NoError(t, nc.Flush())

	run("k2")
	again, next2 := session.KeptInboxes(r.broker)
	require.Equal(t, prefixes, again, "k2 took k1's inbox and gave it back")
	require.Greater(t, next2[0], next[0], "its numbering went on")
}
