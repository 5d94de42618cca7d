package scheduler_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/scheduler"
)

func TestSnapshotRestore(t *testing.T) {
	src := `digraph g { a [budget_tokens=100, max_iterations=3] }`
	s, _, _ := newSched(t, src)
	s.Release(admit(t, s, "a"), scheduler.Result{Status: "success", OutputHash: "1", Usage: scheduler.Usage{OutputTokens: 40}})
	snap := s.Snapshot()
	s2, _, _ := newSched(t, src)
	s2.Restore(snap)
	s2.Release(admit(t, s2, "a"), scheduler.Result{Status: "success", OutputHash: "2", Usage: scheduler.Usage{OutputTokens: 40}})
	evs := s2.Release(admit(t, s2, "a"), scheduler.Result{Status: "success", OutputHash: "3", Usage: scheduler.Usage{OutputTokens: 40}})
	require.Equal(t, "budget.exceeded", evs[len(evs)-1].Kind, "budgets are not reset by a restore")
	_, w, _ := s2.Admit("a")
	require.True(t, w.Stop)
}

func TestConfigErrors(t *testing.T) {
	for _, src := range []string{
		`digraph g { a [trigger=schedule] }`,
		`digraph g { a [trigger=schedule, schedule="not cron"] }`,
		`digraph g { a [trigger=all, join="quorum:x"] }`,
		`digraph g { a [trigger=sometimes] }`,
	} {
		g, _ := graph.Load("t.dot", []byte(src), graph.AsSession())
		_, err := scheduler.ConfigFrom(g)
		require.Error(t, err, src)
	}
}
