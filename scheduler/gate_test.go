package scheduler_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
