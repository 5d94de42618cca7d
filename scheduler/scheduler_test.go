package scheduler_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/scheduler"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// notices collects the scheduler's notices.
type notices struct {
	mu   sync.Mutex
	list []scheduler.Notice
}

func (n *notices) add(x scheduler.Notice) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.list = append(n.list, x)
}

func (n *notices) take() []scheduler.Notice {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := n.list
	n.list = nil
	return out
}

func newSched(t *testing.T, src string) (*scheduler.Scheduler, *clock.Fake, *notices) {
	t.Helper()
	g, diags := graph.Load("t.dot", []byte(src), graph.AsSession())
	require.False(t, diags.HasErrors(), "%v", diags)
	cfg, err := scheduler.ConfigFrom(g)
	require.NoError(t, err)
	clk := clock.NewFake(t0)
	ns := &notices{}
	s, err := scheduler.New(cfg, clk, ns.add)
	require.NoError(t, err)
	s.Start()
	t.Cleanup(s.Close)
	return s, clk, ns
}

func offer(t *testing.T, s *scheduler.Scheduler, node, edge string, item any) scheduler.Decision {
	t.Helper()
	d, err := s.Offer(node, edge, item)
	require.NoError(t, err)
	return d
}

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

func admit(t *testing.T, s *scheduler.Scheduler, node string) *scheduler.Ticket {
	t.Helper()
	tk, w, _ := s.Admit(node)
	require.Nil(t, w)
	require.NotNil(t, tk)
	return tk
}

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

func TestInFlightCap(t *testing.T) {
	s, _, ns := newSched(t, `digraph g { max_in_flight=1; a; b; c }`)
	ta := admit(t, s, "a")
	_, w, evs := s.Admit("b")
	require.NotNil(t, w)
	require.False(t, w.Stop, "waiting for a slot is not a stop")
	require.Equal(t, "gate.waiting", evs[0].Kind)
	require.Contains(t, s.Explain("b"), "in-flight cap: 1 of 1")
	_, w, _ = s.Admit("c")
	require.NotNil(t, w)
	s.Release(ta, scheduler.Result{Status: "success", OutputHash: "x"})
	require.Equal(t, []scheduler.Notice{{Node: "b", Kind: "admit"}}, ns.take(), "the first waiter is woken")
	_, w, _ = s.Admit("c")
	require.NotNil(t, w, "c may not jump the queue")
	admit(t, s, "b")
}

func TestFileLocks(t *testing.T) {
	s, _, ns := newSched(t, `digraph g { a [locks="src/"]; b [locks="src/a.go,docs/"]; c [locks="srcx/,docs2"] }`)
	ta := admit(t, s, "a")
	_, w, evs := s.Admit("b")
	require.NotNil(t, w)
	require.Equal(t, "lock.waiting", evs[0].Kind)
	require.Contains(t, w.Reason, "a holds src/")
	admit(t, s, "c") // srcx/ does not conflict with src/
	s.Release(ta, scheduler.Result{Status: "success", OutputHash: "x"})
	require.Contains(t, ns.take(), scheduler.Notice{Node: "b", Kind: "admit"})
	admit(t, s, "b")
}

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

func BenchmarkOfferAny(b *testing.B) {
	g, _ := graph.Load("t.dot", []byte(`digraph g { a; b; a -> b }`), graph.AsSession())
	cfg, _ := scheduler.ConfigFrom(g)
	s, _ := scheduler.New(cfg, clock.NewFake(t0), nil)
	for i := 0; i < b.N; i++ {
		_, _ = s.Offer("b", "a.b", i)
	}
}

func BenchmarkOfferAll3(b *testing.B) {
	g, _ := graph.Load("t.dot", []byte(`digraph g { a; b; c; j [trigger=all]; a -> j; b -> j; c -> j }`), graph.AsSession())
	cfg, _ := scheduler.ConfigFrom(g)
	s, _ := scheduler.New(cfg, clock.NewFake(t0), nil)
	edges := []string{"a.j", "b.j", "c.j"}
	for i := 0; i < b.N; i++ {
		_, _ = s.Offer("j", edges[i%3], i)
	}
}

// BenchmarkDecision is the whole decision for one envelope: the gate, then
// admission (iterations, budgets, in-flight, locks) and release.
func BenchmarkDecision(b *testing.B) {
	g, _ := graph.Load("t.dot", []byte(`digraph g { max_iterations=1000000000; max_in_flight=4; a; b [max_iterations=1000000000, budget_tokens=1000000000000, locks="src/"]; a -> b }`), graph.AsSession())
	cfg, _ := scheduler.ConfigFrom(g)
	s, _ := scheduler.New(cfg, clock.NewFake(t0), nil)
	for i := 0; i < b.N; i++ {
		_, _ = s.Offer("b", "a.b", i)
		t, _, _ := s.Admit("b")
		s.Release(t, scheduler.Result{Status: "success", OutputHash: itoa(i), Usage: scheduler.Usage{OutputTokens: 1}})
	}
}

func itoa(i int) string { return time.Duration(i).String() }
