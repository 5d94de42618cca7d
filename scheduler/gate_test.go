package scheduler_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/scheduler"
)

func TestGateAny(t *testing.T) {
	s, _, _ := newSched(t, `digraph g { a; b; a -> b }`)
	d := offer(t, s, "b", "a.b", 1)
	require.True(t, d.Fire)
	require.Equal(t, []scheduler.Input{{Edge: "a.b", Item: 1}}, d.Inputs)
}

func TestJoinAcrossThreeEdges(t *testing.T) {
	s, _, _ := newSched(t, `digraph g { a; b; c; j [trigger=all]; a -> j; b -> j; c -> j }`)
	require.False(t, offer(t, s, "j", "a.j", "a1").Fire)
	require.False(t, offer(t, s, "j", "a.j", "a2").Fire, "a second arrival on the same edge does not complete the join")
	d := offer(t, s, "j", "b.j", "b1")
	require.False(t, d.Fire)
	require.Contains(t, d.Reason, "missing c.j")
	require.Contains(t, s.Explain("j"), "join incomplete")
	d = offer(t, s, "j", "c.j", "c1")
	require.True(t, d.Fire)
	require.ElementsMatch(t, []any{"a1", "b1", "c1"}, items(d))
	require.Empty(t, d.Missing)
	// a2 waits for the next round.
	require.False(t, offer(t, s, "j", "b.j", "b2").Fire)
	d = offer(t, s, "j", "c.j", "c2")
	require.True(t, d.Fire)
	require.ElementsMatch(t, []any{"a2", "b2", "c2"}, items(d))
}

func items(d scheduler.Decision) []any {
	var out []any
	for _, in := range d.Inputs {
		out = append(out, in.Item)
	}
	return out
}

func TestJoinQuorumAnyAndSkip(t *testing.T) {
	s, _, _ := newSched(t, `digraph g { a; b; c; q [trigger=all, join="quorum:2"]; y [join=any]; k [trigger=all]
		a -> q; b -> q; c -> q; a -> y; b -> y; a -> k; b -> k }`)
	require.False(t, offer(t, s, "q", "a.q", 1).Fire)
	d := offer(t, s, "q", "c.q", 3)
	require.True(t, d.Fire)
	require.Equal(t, []string{"b.q"}, d.Missing)

	require.True(t, offer(t, s, "y", "b.y", 1).Fire, "join=any fires on the first edge")

	require.False(t, offer(t, s, "k", "a.k", 1).Fire)
	d, err := s.Skip("k", "b.k")
	require.NoError(t, err)
	require.True(t, d.Fire, "an unselected branch cannot hang the join")
	require.Equal(t, []string{}, append([]string{}, d.Missing...))
}

func TestJoinTimeout(t *testing.T) {
	s, clk, ns := newSched(t, `digraph g { a; b; j [trigger=all, join_timeout=30s]; a -> j; b -> j }`)
	require.False(t, offer(t, s, "j", "a.j", 1).Fire)
	clk.Advance(29 * time.Second)
	require.Empty(t, ns.take())
	clk.Advance(time.Second)
	require.Equal(t, []scheduler.Notice{{Node: "j", Kind: "timer"}}, ns.take())
	d, err := s.Timer("j")
	require.NoError(t, err)
	require.True(t, d.Fire, "on timeout the node fires with what it has")
	require.Equal(t, []string{"b.j"}, d.Missing, "and says which inputs were missing")
}

func TestManualTrigger(t *testing.T) {
	s, _, _ := newSched(t, `digraph g { a; m [trigger=manual]; a -> m }`)
	require.Contains(t, s.Explain("m"), "manual trigger pending")
	require.False(t, offer(t, s, "m", "a.m", "x").Fire)
	d, err := s.Trigger("m")
	require.NoError(t, err)
	require.True(t, d.Fire)
	require.Equal(t, []any{"x"}, items(d))
}

func TestCronFiresThreeTimes(t *testing.T) {
	s, clk, ns := newSched(t, `digraph g { tick [trigger=schedule, schedule="*/10 * * * * *"] }`)
	require.Contains(t, s.Explain("tick"), "next cron time 2026-11-22T10:00:10Z")
	fired := 0
	for i := 0; i < 3; i++ {
		clk.Advance(10 * time.Second)
		for _, n := range ns.take() {
			require.Equal(t, "timer", n.Kind)
			d, err := s.Timer(n.Node)
			require.NoError(t, err)
			require.True(t, d.Fire)
			require.True(t, d.Tick)
			fired++
		}
	}
	require.Equal(t, 3, fired)
	require.Contains(t, s.Explain("tick"), "next cron time 2026-11-22T10:00:40Z")
}

func TestCronSpecs(t *testing.T) {
	for _, tc := range []struct {
		spec  string
		nexts []string // the first fire times after t0 = 10:00:00
	}{
		{"@every 1m", []string{"10:01:00", "10:02:00"}},
		{"*/15 * * * *", []string{"10:15:00", "10:30:00"}},
		{"30 */5 * * * *", []string{"10:00:30", "10:05:30"}},
		{"@hourly", []string{"11:00:00", "12:00:00"}},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			s, clk, ns := newSched(t, `digraph g { c [trigger=schedule, schedule="`+tc.spec+`"] }`)
			for _, want := range tc.nexts {
				st, _ := s.State("c")
				require.Equal(t, scheduler.CauseNextCron, st.Cause)
				require.Equal(t, "2026-11-22T"+want+"Z", st.Fields["next"])
				next, err := time.Parse(time.RFC3339, st.Fields["next"])
				require.NoError(t, err)
				clk.Advance(next.Sub(clk.Now()) - time.Nanosecond)
				require.Empty(t, ns.take(), "not before its time")
				clk.Advance(time.Nanosecond)
				require.Equal(t, []scheduler.Notice{{Node: "c", Kind: scheduler.NoticeTimer}}, ns.take())
				d, err := s.Timer("c")
				require.NoError(t, err)
				require.True(t, d.Fire && d.Tick)
				s.Release(admit(t, s, "c"), scheduler.Result{Status: "success", OutputHash: want})
			}
		})
	}
}

func TestCronTakesWhatArrived(t *testing.T) {
	s, clk, ns := newSched(t, `digraph g { a; c [trigger=schedule, schedule="@every 1m"]; a -> c }`)
	require.False(t, s.Wants("c", "a.c"), "arrivals wait in their buffers until the tick")
	require.False(t, offer(t, s, "c", "a.c", "x").Fire)
	clk.Advance(time.Minute)
	require.Len(t, ns.take(), 1)
	d, err := s.Timer("c")
	require.NoError(t, err)
	require.Equal(t, []any{"x"}, items(d))
}

func TestGateEdgeCases(t *testing.T) {
	src := `digraph g { a; b; j [trigger=all, join_timeout=1m]; m [trigger=manual]; a -> j; b -> j; a -> m }`
	t.Run("inbox arrival fires a join on its own", func(t *testing.T) {
		s, _, _ := newSched(t, src)
		d := offer(t, s, "j", "", "poke")
		require.True(t, d.Fire)
		require.Equal(t, []any{"poke"}, items(d))
	})
	t.Run("a join wants only edges that have not delivered", func(t *testing.T) {
		s, _, _ := newSched(t, src)
		require.True(t, s.Wants("j", "a.j"))
		offer(t, s, "j", "a.j", 1)
		require.False(t, s.Wants("j", "a.j"))
		require.True(t, s.Wants("j", "b.j"))
	})
	t.Run("skipping a delivered edge changes nothing", func(t *testing.T) {
		s, _, _ := newSched(t, src)
		offer(t, s, "j", "a.j", 1)
		d, err := s.Skip("j", "a.j")
		require.NoError(t, err)
		require.False(t, d.Fire)
		require.Contains(t, d.Reason, "missing b.j")
	})
	t.Run("skipping every edge fires nothing", func(t *testing.T) {
		s, _, _ := newSched(t, src)
		for _, e := range []string{"a.j", "b.j"} {
			d, err := s.Skip("j", e)
			require.NoError(t, err)
			require.False(t, d.Fire)
		}
	})
	t.Run("the join timeout is armed by the first arrival only", func(t *testing.T) {
		s, clk, ns := newSched(t, src)
		clk.Advance(2 * time.Minute)
		require.Empty(t, ns.take())
		offer(t, s, "j", "a.j", 1)
		clk.Advance(30 * time.Second)
		offer(t, s, "j", "a.j", 2)
		clk.Advance(30 * time.Second)
		require.Equal(t, []scheduler.Notice{{Node: "j", Kind: scheduler.NoticeTimer}}, ns.take())
		d, err := s.Timer("j")
		require.NoError(t, err)
		require.Equal(t, []any{1}, items(d))
		require.Equal(t, []string{"b.j"}, d.Missing)
	})
	t.Run("a manual trigger with nothing held is a tick", func(t *testing.T) {
		s, _, _ := newSched(t, src)
		d, err := s.Trigger("m")
		require.NoError(t, err)
		require.True(t, d.Fire && d.Tick)
		require.Empty(t, d.Inputs)
	})
	t.Run("unknown node", func(t *testing.T) {
		s, _, _ := newSched(t, src)
		_, err := s.Offer("nope", "", 1)
		require.Error(t, err)
	})
}

// TestGateModes asks every gate the same questions.
func TestGateModes(t *testing.T) {
	src := `digraph g { u; n_any; n_all [trigger=all]; n_manual [trigger=manual]; n_cron [trigger=schedule, schedule="@every 1h"];
		u -> n_any; u -> n_all; u -> n_manual; u -> n_cron }`
	for _, tc := range []struct {
		node                      string
		wants                     bool
		waiting                   string // substring of Waiting before any arrival
		triggerFires, triggerTick bool
		timerFires                bool
	}{
		{"n_any", true, "", true, true, false},
		{"n_all", true, "join incomplete", true, false, false},
		{"n_manual", false, "manual trigger pending", true, true, false},
		{"n_cron", false, "next cron time 2026-11-22T11:00:00Z", true, true, true},
	} {
		t.Run(tc.node, func(t *testing.T) {
			s, _, _ := newSched(t, src)
			edge := "u." + tc.node
			require.Equal(t, tc.wants, s.Wants(tc.node, edge))
			if tc.waiting == "" {
				require.Empty(t, s.Waiting(tc.node))
			} else {
				require.Contains(t, s.Waiting(tc.node), tc.waiting)
			}
			d, err := s.Skip(tc.node, edge)
			require.NoError(t, err)
			require.False(t, d.Fire, "a skip alone never fires")
			d, err = s.Timer(tc.node)
			require.NoError(t, err)
			require.Equal(t, tc.timerFires, d.Fire)
			d, err = s.Trigger(tc.node)
			require.NoError(t, err)
			require.Equal(t, tc.triggerFires, d.Fire)
			require.Equal(t, tc.triggerTick, d.Tick)
		})
	}
}

func TestNodeConfigFrom(t *testing.T) {
	g, diags := graph.Load("t.dot", []byte(`digraph g { stall_after=5; subgraph cluster_x { graph [budget_cost=2]; a }
		b; c [shape=tripleoctagon]; a -> c; b -> c; a [trigger=all, join="quorum:1", join_timeout="90s", locks=" src/ , go.mod ", budget_tokens=10] }`),
		graph.AsSession())
	require.False(t, diags.HasErrors(), "%v", diags)
	for _, tc := range []struct {
		node string
		want scheduler.NodeConfig
	}{
		{"a", scheduler.NodeConfig{ID: "a", Trigger: "all", Join: "quorum:1", Quorum: 1, JoinTimeout: 90 * time.Second,
			Budget: scheduler.Limits{Tokens: 10}, Scopes: []string{"subgraph:cluster_x", "graph"},
			StallAfter: 5, Locks: []string{"src/", "go.mod"}}},
		{"c", scheduler.NodeConfig{ID: "c", Trigger: "all", Join: "all", Upstream: []string{"a.c", "b.c"},
			Scopes: []string{"graph"}, StallAfter: 5}},
	} {
		t.Run(tc.node, func(t *testing.T) {
			nc, err := scheduler.NodeConfigFrom(g, g.Node(tc.node))
			require.NoError(t, err)
			require.Equal(t, &tc.want, nc)
		})
	}
}
