package scheduler_test

import (
	"encoding/json"
	"testing"
	"time"

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

func TestGateStates(t *testing.T) {
	src := `digraph g { max_in_flight=1; a; b; j [trigger=all]; m [trigger=manual]; c [trigger=schedule, schedule="@every 1m"];
		x [max_iterations=1]; a -> j; b -> j }`
	for _, tc := range []struct {
		name   string
		do     func(t *testing.T, s *scheduler.Scheduler)
		node   string
		state  string
		cause  string
		fields map[string]string
	}{
		{"idle", func(*testing.T, *scheduler.Scheduler) {}, "a", scheduler.StateIdle, "", nil},
		{"join incomplete", func(t *testing.T, s *scheduler.Scheduler) { offer(t, s, "j", "a.j", 1) },
			"j", scheduler.StateWaiting, scheduler.CauseJoinIncomplete, map[string]string{"missing": "b.j", "need": "all", "upstream": "2"}},
		{"ready after the gate fired", func(t *testing.T, s *scheduler.Scheduler) { offer(t, s, "a", "", 1) },
			"a", scheduler.StateReady, "", nil},
		{"manual pending", func(t *testing.T, s *scheduler.Scheduler) { offer(t, s, "m", "", 1) },
			"m", scheduler.StateWaiting, scheduler.CauseManualPending, map[string]string{"held": "1"}},
		{"next cron", func(*testing.T, *scheduler.Scheduler) {},
			"c", scheduler.StateWaiting, scheduler.CauseNextCron, map[string]string{"next": "2026-11-22T10:01:00Z", "held": "0"}},
		{"running", func(t *testing.T, s *scheduler.Scheduler) { admit(t, s, "a") }, "a", scheduler.StateRunning, "", nil},
		{"in-flight cap", func(t *testing.T, s *scheduler.Scheduler) { admit(t, s, "a"); s.Admit("b") },
			"b", scheduler.StateWaiting, scheduler.CauseInFlightCap, map[string]string{"running": "1", "max": "1", "position": "1"}},
		{"max iterations", func(t *testing.T, s *scheduler.Scheduler) {
			s.Release(admit(t, s, "x"), scheduler.Result{Status: "success"})
			s.Admit("x")
		}, "x", scheduler.StateStopped, scheduler.CauseMaxIterations, map[string]string{"limit": "1", "scope": "node"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, _ := newSched(t, src)
			tc.do(t, s)
			st, ok := s.State(tc.node)
			require.True(t, ok)
			require.Equal(t, tc.state, st.State)
			require.Equal(t, tc.cause, st.Cause)
			require.Equal(t, tc.fields, st.Fields)
			require.Contains(t, s.Explain(tc.node), tc.node+" is "+tc.state)
			require.Equal(t, st, s.States()[indexOf(s.States(), tc.node)])
		})
	}
}

func indexOf(states []scheduler.GateState, node string) int {
	for i, st := range states {
		if st.Node == node {
			return i
		}
	}
	return -1
}

func TestSnapshotJSONRoundTrip(t *testing.T) {
	src := `digraph g { a [budget_tokens=100]; b; p; j [trigger=all]; p -> j; b -> j }`
	s, _, _ := newSched(t, src)
	evs := s.Release(admit(t, s, "a"), scheduler.Result{Status: "success", OutputHash: "h", Usage: scheduler.Usage{OutputTokens: 85}})
	require.Len(t, evs, 1, "80% announced")
	s.Release(admit(t, s, "b"), scheduler.Result{Status: "success", OutputHash: "same"})
	s.Release(admit(t, s, "b"), scheduler.Result{Status: "success", OutputHash: "same"})
	_, err := s.Skip("j", "p.j")
	require.NoError(t, err)

	raw, err := json.Marshal(s.Snapshot())
	require.NoError(t, err)
	var snap scheduler.Snapshot
	require.NoError(t, json.Unmarshal(raw, &snap))
	require.Equal(t, "skipped", snap.Joins["j"].Edges["p.j"])

	s2, _, _ := newSched(t, src)
	s2.Restore(snap)
	require.Equal(t, 3, s2.Snapshot().Total)
	evs = s2.Release(admit(t, s2, "a"), scheduler.Result{Status: "success", OutputHash: "h2", Usage: scheduler.Usage{OutputTokens: 5}})
	require.Empty(t, evs, "80% is not announced twice")
	evs = s2.Release(admit(t, s2, "b"), scheduler.Result{Status: "success", OutputHash: "same"})
	require.Equal(t, scheduler.EventStallDetected, evs[0].Kind, "the stall window survives")
	d := offer(t, s2, "j", "b.j", "x")
	require.True(t, d.Fire, "the skipped edge survives: the join does not hang")
}

func TestRestoreKeepsStalledNodesStopped(t *testing.T) {
	src := `digraph g { a [stall_after=1] }`
	s, _, _ := newSched(t, src)
	s.Release(admit(t, s, "a"), scheduler.Result{Status: "fail", Failure: "same"})
	s2, _, _ := newSched(t, src)
	s2.Restore(s.Snapshot())
	_, w, _ := s2.Admit("a")
	require.NotNil(t, w)
	require.ErrorIs(t, w.Err, scheduler.ErrStalled)
}

func TestReconfigure(t *testing.T) {
	s, _, ns := newSched(t, `digraph g { max_in_flight=1; a [trigger=manual]; b; c; u; u -> a }`)
	require.False(t, offer(t, s, "a", "u.a", "held").Fire)
	tc := admit(t, s, "c")
	_, w, _ := s.Admit("b")
	require.NotNil(t, w)
	held, err := s.Reconfigure(config(t, `digraph g { max_in_flight=2; a; c; d; u; u -> a }`))
	require.NoError(t, err)
	require.Equal(t, []scheduler.Input{{Edge: "u.a", Item: "held"}}, held["a"], "a's new gate gets what the old one held")
	require.Empty(t, held["b"])
	require.Empty(t, ns.take(), "b left the queue; nobody else waits")
	var nodes []string
	for _, st := range s.States() {
		nodes = append(nodes, st.Node)
	}
	require.Equal(t, []string{"a", "c", "d", "u"}, nodes)
	require.True(t, offer(t, s, "a", "u.a", 1).Fire, "a is trigger=any now")
	admit(t, s, "d") // the raised cap admits a second handler
	s.Release(tc, scheduler.Result{Status: "success", OutputHash: "1"})
	require.Equal(t, 2, s.Snapshot().Iterations["c"]+s.Snapshot().Iterations["d"], "counters are kept")
}

type envelope struct{ id string }

func (e envelope) GetId() string { return e.id }

func TestSnapshotRecordsHeldInputsByID(t *testing.T) {
	s, _, _ := newSched(t, `digraph g { u; v; m [trigger=manual]; j [trigger=all]; u -> m; u -> j; v -> j }`)
	offer(t, s, "m", "u.m", envelope{"e1"})
	offer(t, s, "j", "u.j", envelope{"e2"})
	snap := s.Snapshot()
	require.Equal(t, map[string][]string{"m": {"e1"}}, snap.Held)
	require.Equal(t, scheduler.Join{Edges: map[string]string{"u.j": "delivered", "v.j": "waiting"},
		Queued: map[string][]string{"u.j": {"e2"}}}, snap.Joins["j"])
}

// TestSnapshotOfMerges: the partial snapshots of each firing, merged in
// order into the whole snapshot before them, give the whole snapshot after
// them (what a durable session's journal replays), through JSON.
func TestSnapshotOfMerges(t *testing.T) {
	src := `digraph g { graph [budget_tokens=1000, max_iterations="50/1h"]
		a [budget_tokens=100, stall_after=3]; b [max_iterations="5/1h"]; j [trigger=all]; m [trigger=manual]; c
		a -> j; b -> j }`
	s, clk, _ := newSched(t, src)
	merged := s.Snapshot()
	step := func(node string) {
		t.Helper()
		raw, err := json.Marshal(s.SnapshotOf(node))
		require.NoError(t, err)
		var p scheduler.Snapshot
		require.NoError(t, json.Unmarshal(raw, &p))
		require.True(t, p.Partial)
		merged.Merge(p)
	}
	fire := func(node, out string, tokens int64) {
		t.Helper()
		s.Release(admit(t, s, node), scheduler.Result{Status: "success", OutputHash: out, Usage: scheduler.Usage{OutputTokens: tokens}})
		step(node)
	}
	fire("a", "1", 40)
	offer(t, s, "j", "a.j", "x")
	fire("b", "2", 0)
	offer(t, s, "m", "", "y")
	clk.Advance(2 * time.Hour) // the windows empty
	fire("b", "3", 0)
	fire("c", "4", 5)
	fire("a", "5", 70) // past a's budget: announced
	step("")           // a record outside a firing

	want, err := json.Marshal(s.Snapshot())
	require.NoError(t, err)
	got, err := json.Marshal(merged)
	require.NoError(t, err)
	require.JSONEq(t, string(want), string(got))
}

// TestSnapshotOfWindows: a partial snapshot sets the firing windows of
// the scopes a windowed cap counts, and only those (a durable session
// writes one with every record); a node a live edit removed and added
// again without its cap still clears, merged, the window it had.
func TestSnapshotOfWindows(t *testing.T) {
	s, clk, _ := newSched(t, `digraph g { a; b [max_iterations="5/1h"] }`)
	merged := s.Snapshot()
	step := func(node string) scheduler.Snapshot {
		t.Helper()
		raw, err := json.Marshal(s.SnapshotOf(node))
		require.NoError(t, err)
		var p scheduler.Snapshot
		require.NoError(t, json.Unmarshal(raw, &p))
		merged.Merge(p)
		return p
	}
	fire := func(node string) scheduler.Snapshot {
		t.Helper()
		s.Release(admit(t, s, node), scheduler.Result{Status: "success", OutputHash: clk.Now().String()})
		return step(node)
	}
	require.Nil(t, fire("a").Windows, "no windowed cap: no window")
	require.Len(t, fire("b").Windows["b"], 1)
	require.Len(t, merged.Windows["b"], 1)

	_, err := s.Reconfigure(config(t, `digraph g { a }`))
	require.NoError(t, err)
	_, err = s.Reconfigure(config(t, `digraph g { a; b }`))
	require.NoError(t, err)
	clk.Advance(time.Minute)
	fire("b")
	require.NotContains(t, merged.Windows, "b", "the window b had before its removal is cleared")
	want, err := json.Marshal(s.Snapshot())
	require.NoError(t, err)
	got, err := json.Marshal(merged)
	require.NoError(t, err)
	require.JSONEq(t, string(want), string(got))
}

// A node whose state never changed is idle since the scheduler was made
// (the scheduler stores no state for it: a large idle session's nodes cost
// none); a node a live edit adds is idle since the edit; one that ran is
// idle since it finished. Stall windows are made on a node's first release
// and still stop a node that repeats itself.
func TestIdleSinceAndLazyStalls(t *testing.T) {
	s, clk, _ := newSched(t, `digraph g { a; b [stall_after=2] }`)
	st, ok := s.State("a")
	require.True(t, ok)
	require.Equal(t, scheduler.GateState{Node: "a", State: scheduler.StateIdle, Since: t0}, st)
	_, ok = s.State("nosuch")
	require.False(t, ok)

	clk.Advance(time.Minute)
	_, err := s.Reconfigure(config(t, `digraph g { a; b [stall_after=2]; c }`))
	require.NoError(t, err)
	st, _ = s.State("c")
	require.Equal(t, t0.Add(time.Minute), st.Since, "added by the edit")
	st, _ = s.State("a")
	require.Equal(t, t0, st.Since, "an untouched node keeps its time")

	clk.Advance(time.Minute)
	s.Release(admit(t, s, "a"), scheduler.Result{Status: "success", OutputHash: "1"})
	st, _ = s.State("a")
	require.Equal(t, scheduler.StateIdle, st.State)
	require.Equal(t, t0.Add(2*time.Minute), st.Since, "idle again since it finished")
	require.Len(t, s.States(), 3)

	s.Release(admit(t, s, "b"), scheduler.Result{Status: "success", InputHash: "i", OutputHash: "o"})
	evs := s.Release(admit(t, s, "b"), scheduler.Result{Status: "success", InputHash: "i", OutputHash: "o"})
	require.Equal(t, "stall.detected", evs[len(evs)-1].Kind)
	st, _ = s.State("b")
	require.Equal(t, scheduler.StateStopped, st.State)
}
