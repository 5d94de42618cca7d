package scheduler_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/scheduler"
)

func TestMaxIterations(t *testing.T) {
	s, _, _ := newSched(t, `digraph g { max_iterations=5; a [max_iterations=2]; b; a -> b -> a }`)
	for i := 0; i < 2; i++ {
		s.Release(admit(t, s, "a"), scheduler.Result{Status: "success", OutputHash: string(rune('a' + i))})
	}
	_, w, evs := s.Admit("a")
	require.NotNil(t, w)
	require.True(t, w.Stop)
	require.ErrorIs(t, w.Err, scheduler.ErrMaxIterations)
	require.Equal(t, "iterations.exceeded", evs[0].Kind)
	require.Contains(t, s.Explain("a"), "a is stopped")
	for i := 0; i < 3; i++ {
		s.Release(admit(t, s, "b"), scheduler.Result{Status: "success", OutputHash: string(rune('a' + i))})
	}
	_, w, _ = s.Admit("b")
	require.NotNil(t, w, "the graph's limit of 5 firings")
	require.Contains(t, w.Reason, "graph max_iterations")
}

func TestTokenBudget(t *testing.T) {
	s, _, _ := newSched(t, `digraph g { a [budget_tokens=1000] }`)
	evs := s.Release(admit(t, s, "a"), scheduler.Result{Status: "success", OutputHash: "1", Usage: scheduler.Usage{InputTokens: 500, OutputTokens: 350}})
	require.Len(t, evs, 1)
	require.Equal(t, "budget.threshold", evs[0].Kind)
	require.Equal(t, "80", evs[0].Fields["percent"])
	evs = s.Release(admit(t, s, "a"), scheduler.Result{Status: "success", OutputHash: "2", Usage: scheduler.Usage{OutputTokens: 200}})
	require.Len(t, evs, 1)
	require.Equal(t, "budget.exceeded", evs[0].Kind)
	_, w, _ := s.Admit("a")
	require.NotNil(t, w)
	require.ErrorIs(t, w.Err, scheduler.ErrBudgetExceeded)
	require.Contains(t, w.Reason, "1050 tokens of 1000 tokens")
}

func TestBudgetCrossedDuringRunCancels(t *testing.T) {
	s, _, ns := newSched(t, `digraph g { budget_cost=1.0; a; b; a -> b }`)
	ta := admit(t, s, "a")
	tb := admit(t, s, "b")
	evs := s.Charge(ta, scheduler.Usage{Cost: 1.5})
	require.Equal(t, "budget.threshold", evs[0].Kind)
	require.Equal(t, "budget.exceeded", evs[1].Kind)
	require.ElementsMatch(t, []scheduler.Notice{{Node: "a", Kind: "cancel"}, {Node: "b", Kind: "cancel"}}, ns.take(),
		"a graph budget crossed mid-run cancels every running handler under it")
	s.Release(ta, scheduler.Result{Status: "fail"})
	s.Release(tb, scheduler.Result{Status: "fail"})
	_, w, _ := s.Admit("b")
	require.True(t, w.Stop)
}

func TestTimeBudgetDeadline(t *testing.T) {
	s, clk, _ := newSched(t, `digraph g { a [budget_time=10m] }`)
	tk := admit(t, s, "a")
	require.Equal(t, t0.Add(10*time.Minute), tk.Deadline)
	clk.Advance(7 * time.Minute)
	s.Release(tk, scheduler.Result{Status: "success", OutputHash: "x"})
	tk = admit(t, s, "a")
	require.Equal(t, clk.Now().Add(3*time.Minute), tk.Deadline, "time spent across firings counts")
}

func TestSubgraphBudget(t *testing.T) {
	s, _, _ := newSched(t, `digraph g { subgraph cluster_agents { graph [budget_tokens=100]; a; b }; c; a -> b -> c }`)
	s.Release(admit(t, s, "a"), scheduler.Result{Status: "success", OutputHash: "1", Usage: scheduler.Usage{OutputTokens: 100}})
	_, w, _ := s.Admit("b")
	require.NotNil(t, w, "b shares a's subgraph budget")
	require.Contains(t, w.Reason, "subgraph:cluster_agents")
	admit(t, s, "c")
}

func TestStallDetection(t *testing.T) {
	s, _, _ := newSched(t, `digraph g { a; b [stall_after=2] }`)
	var evs []scheduler.Event
	for i := 0; i < 3; i++ {
		evs = s.Release(admit(t, s, "a"), scheduler.Result{Status: "fail", Failure: "tests failed: TestX"})
	}
	require.Len(t, evs, 1)
	require.Equal(t, "stall.detected", evs[0].Kind)
	require.Contains(t, evs[0].Reason, "tests failed: TestX", "the event names the repeating evidence")
	_, w, _ := s.Admit("a")
	require.ErrorIs(t, w.Err, scheduler.ErrStalled)

	s.Release(admit(t, s, "b"), scheduler.Result{Status: "success", OutputHash: "h1"})
	s.Release(admit(t, s, "b"), scheduler.Result{Status: "success", OutputHash: "h2"})
	evs = s.Release(admit(t, s, "b"), scheduler.Result{Status: "success", OutputHash: "h2"})
	require.Equal(t, "stall.detected", evs[0].Kind)
}

func TestSessionStallTimeout(t *testing.T) {
	s, clk, ns := newSched(t, `digraph g { stall_timeout=5m; a }`)
	clk.Advance(4 * time.Minute)
	s.Progress()
	clk.Advance(4 * time.Minute)
	require.Empty(t, ns.take(), "progress restarted the watchdog")
	clk.Advance(time.Minute)
	require.Equal(t, []scheduler.Notice{{Kind: "stall"}}, ns.take())
	evs := s.StallTimeout()
	require.Equal(t, "stall.detected", evs[0].Kind)
	_, w, _ := s.Admit("a")
	require.True(t, w.Stop)
}
