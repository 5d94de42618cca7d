package scheduler_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph"
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
	require.ElementsMatch(t, []scheduler.Notice{{Node: "a", Kind: "cancel"}, {Node: "b", Kind: "cancel"},
		{Node: "a", Kind: scheduler.NoticeStopped}, {Node: "b", Kind: scheduler.NoticeStopped}}, ns.take(),
		"a graph budget crossed mid-run cancels every running handler under it and stops every node under it")
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

// TestStallNeedsSameInput: the same reply to different inputs is not a
// stall, nor are firings on clock ticks; the same input answered the same
// way is.
func TestStallNeedsSameInput(t *testing.T) {
	s, _, _ := newSched(t, `digraph g { kind=session; a; cron [trigger=schedule, schedule="@every 1s"] }`)
	for i := 0; i < 10; i++ {
		evs := s.Release(admit(t, s, "a"), scheduler.Result{InputHash: "event-" + itoa(i), Status: "success", OutputHash: "ack"})
		require.Empty(t, evs, "different events that get the same acknowledgement are progress")
	}
	for i := 0; i < 10; i++ {
		evs := s.Release(admit(t, s, "cron"), scheduler.Result{Tick: true, Status: "success", OutputHash: "digest"})
		require.Empty(t, evs, "a cron tick is never a stall")
	}
	var evs []scheduler.Event
	for i := 0; i < 3; i++ {
		evs = s.Release(admit(t, s, "a"), scheduler.Result{InputHash: "same", Status: "success", OutputHash: "same answer"})
	}
	require.Len(t, evs, 1, "the same input with the same answer three times is a stall")
	require.Equal(t, "stall.detected", evs[0].Kind)
	_, w, _ := s.Admit("a")
	require.ErrorIs(t, w.Err, scheduler.ErrStalled)
}

// TestWindowedCapWaits: max_iterations="3/1h" lets three firings in per
// hour; the fourth waits (an event, a state explain shows) and is let in
// when the first leaves the window.
func TestWindowedCapWaits(t *testing.T) {
	s, clk, ns := newSched(t, `digraph g { kind=session; a [max_iterations="3/1h"] }`)
	for i := 0; i < 3; i++ {
		s.Release(admit(t, s, "a"), scheduler.Result{InputHash: itoa(i), Status: "success"})
		clk.Advance(10 * time.Minute)
	}
	_, w, evs := s.Admit("a")
	require.NotNil(t, w)
	require.False(t, w.Stop, "a windowed cap makes the node wait, it does not stop it")
	require.Equal(t, scheduler.CauseIterationWindow, w.Cause)
	require.Len(t, evs, 1)
	require.Equal(t, scheduler.EventIterationsWaiting, evs[0].Kind)
	require.Contains(t, s.Explain("a"), "a is waiting: node a fired 3 times in the last 1h")
	_, _, evs = s.Admit("a")
	require.Empty(t, evs, "the wait is announced once")
	clk.Advance(29 * time.Minute)
	require.Empty(t, ns.take())
	clk.Advance(time.Minute)
	require.Equal(t, []scheduler.Notice{{Node: "a", Kind: "admit"}}, ns.take(), "woken when the first firing leaves the window")
	s.Release(admit(t, s, "a"), scheduler.Result{InputHash: "x", Status: "success"})
	_, w, _ = s.Admit("a")
	require.NotNil(t, w, "three firings in the last hour again")
}

// TestCronDoesNotDrift: a scheduled node handled late keeps its marks:
// the next firing is a period after the last scheduled time, not after
// the moment the late firing was handled.
func TestCronDoesNotDrift(t *testing.T) {
	s, clk, ns := newSched(t, `digraph g { kind=session; a [trigger=schedule, schedule="@every 1m"] }`)
	clk.Advance(time.Minute)
	require.Equal(t, []scheduler.Notice{{Node: "a", Kind: "timer"}}, ns.take())
	for i := 0; i < 3; i++ {
		clk.Advance(7 * time.Second) // the owner handles the tick late
		d, err := s.Timer("a")
		require.NoError(t, err)
		require.True(t, d.Fire)
		clk.Advance(52 * time.Second)
		require.Empty(t, ns.take())
		clk.Advance(time.Second)
		require.Equal(t, []scheduler.Notice{{Node: "a", Kind: "timer"}}, ns.take(), "the next mark is a minute after the last, exactly")
	}
	require.Equal(t, t0.Add(4*time.Minute), clk.Now())
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

// TestArrivedIsProgressAndWants: an arrival restarts the stall watchdog
// as Progress does, and says whether the node's gate wants it now and,
// when not, why it waits.
func TestArrivedIsProgressAndWants(t *testing.T) {
	s, clk, ns := newSched(t, `digraph g { stall_timeout=5m; x; a; m [trigger=manual]; x -> a; x -> m }`)
	clk.Advance(4 * time.Minute)
	wants, waiting := s.Arrived("a", "x->a")
	require.True(t, wants)
	require.Empty(t, waiting)
	clk.Advance(4 * time.Minute)
	require.Empty(t, ns.take(), "the arrival restarted the watchdog")
	wants, waiting = s.Arrived("m", "x->m")
	require.False(t, wants, "a manual gate wants nothing until its trigger")
	require.Equal(t, s.Waiting("m"), waiting)
	require.NotEmpty(t, waiting)
	wants, waiting = s.Arrived("nope", "")
	require.False(t, wants)
	require.Empty(t, waiting)
	clk.Advance(5 * time.Minute)
	require.Equal(t, []scheduler.Notice{{Kind: "stall"}}, ns.take())
}

func TestDefaultBounds(t *testing.T) {
	for _, tc := range []struct {
		name, src         string
		nodeMax, graphMax graph.Limit
	}{
		{"a pipeline's defaults", `digraph g { start [shape=Mdiamond]; exit [shape=Msquare]; a [label=a]; start -> a -> exit }`, graph.Limit{N: 100}, graph.Limit{N: 10000}},
		{"max_visits", `digraph g { start [shape=Mdiamond]; exit [shape=Msquare]; a [label=a, max_visits=7]; start -> a -> exit }`, graph.Limit{N: 7}, graph.Limit{N: 10000}},
		{"max_iterations wins", `digraph g { kind=session; max_iterations=50; a [max_visits=7, max_iterations=9] }`, graph.Limit{N: 9}, graph.Limit{N: 50}},
		{"zero is unlimited", `digraph g { max_iterations=0; start [shape=Mdiamond]; exit [shape=Msquare]; a [label=a, max_visits=0]; start -> a -> exit }`, graph.Limit{}, graph.Limit{}},
		{"a session has no default cap", `digraph g { kind=session; a }`, graph.Limit{}, graph.Limit{}},
		{"windowed", `digraph g { kind=session; max_iterations="1000/1d"; a [max_iterations="100/1h"] }`,
			graph.Limit{N: 100, Window: time.Hour}, graph.Limit{N: 1000, Window: 24 * time.Hour}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, diags := graph.Load("t.dot", []byte(tc.src))
			require.False(t, diags.HasErrors(), "%v", diags)
			cfg, err := scheduler.ConfigFrom(g)
			require.NoError(t, err)
			require.Equal(t, tc.nodeMax, cfg.Nodes["a"].MaxIterations)
			require.Equal(t, tc.graphMax, cfg.MaxIterations)
		})
	}
}

// TestCycleStops runs a reactive cycle a ⇄ b the way the actors would:
// every admitted firing of one hands the other an arrival.
func TestCycleStops(t *testing.T) {
	s, _, _ := newSched(t, `digraph g { a [max_visits=3]; b; a -> b; b -> a }`)
	node, fired := "a", 0
	var stop *scheduler.Wait
	var evs []scheduler.Event
	for fired < 100 {
		tk, w, e := s.Admit(node)
		if w != nil {
			stop, evs = w, e
			break
		}
		fired++
		s.Release(tk, scheduler.Result{Status: "success", OutputHash: itoa(fired)})
		next := map[string]string{"a": "b", "b": "a"}[node]
		require.True(t, offer(t, s, next, node+"."+next, fired).Fire)
		node = next
	}
	require.Equal(t, 6, fired, "a fires 3 times, b 3 times, then a refuses")
	require.True(t, stop.Stop)
	require.ErrorIs(t, stop.Err, scheduler.ErrMaxIterations)
	require.Equal(t, scheduler.EventIterationsExceeded, evs[0].Kind)
	require.Equal(t, "node", evs[0].Fields["scope"])
}

func TestBudgetThresholdsAnnouncedOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		src    string
		charge []scheduler.Usage
		kinds  [][]string // events per charge
	}{
		{"cost", `digraph g { a [budget_cost=1.0] }`,
			[]scheduler.Usage{{Cost: 0.5}, {Cost: 0.35}, {Cost: 0.05}, {Cost: 0.2}, {Cost: 1}},
			[][]string{nil, {"budget.threshold"}, nil, {"budget.exceeded"}, nil}},
		{"tokens straight past both", `digraph g { a [budget_tokens=10] }`,
			[]scheduler.Usage{{InputTokens: 5, OutputTokens: 10}, {OutputTokens: 1}},
			[][]string{{"budget.threshold", "budget.exceeded"}, nil}},
		{"graph scope", `digraph g { budget_tokens=100; a }`,
			[]scheduler.Usage{{OutputTokens: 80}},
			[][]string{{"budget.threshold"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, _ := newSched(t, tc.src)
			tk := admit(t, s, "a")
			for i, u := range tc.charge {
				var kinds []string
				for _, e := range s.Charge(tk, u) {
					kinds = append(kinds, e.Kind)
				}
				require.Equal(t, tc.kinds[i], kinds, "charge %d", i)
			}
		})
	}
}

func TestTimeBudgetSpentAcrossFirings(t *testing.T) {
	s, clk, _ := newSched(t, `digraph g { budget_time=1h; a }`)
	tk := admit(t, s, "a")
	clk.Advance(50 * time.Minute)
	evs := s.Release(tk, scheduler.Result{Status: "success", OutputHash: "1"})
	require.Equal(t, "80", evs[0].Fields["percent"])
	tk = admit(t, s, "a")
	require.Equal(t, clk.Now().Add(10*time.Minute), tk.Deadline, "the graph's remaining time is the handler's deadline")
	clk.Advance(10 * time.Minute)
	evs = s.Release(tk, scheduler.Result{Status: "success", OutputHash: "2"})
	require.Equal(t, scheduler.EventBudgetExceeded, evs[0].Kind)
	_, w, _ := s.Admit("a")
	require.ErrorIs(t, w.Err, scheduler.ErrBudgetExceeded)
	require.Equal(t, scheduler.CauseBudgetSpent, w.Cause)
}

func TestStallWindow(t *testing.T) {
	ok := func(h string) scheduler.Result { return scheduler.Result{Status: "success", OutputHash: h} }
	fail := func(f, h string) scheduler.Result { return scheduler.Result{Status: "fail", Failure: f, OutputHash: h} }
	for _, tc := range []struct {
		name    string
		attrs   string
		results []scheduler.Result
		stallAt int // 1-based result that stalls; 0: never
	}{
		{"same output three times", ``, []scheduler.Result{ok("1"), ok("1"), ok("1")}, 3},
		{"alternating never stalls", ``, []scheduler.Result{ok("1"), ok("2"), ok("1"), ok("2"), ok("1")}, 0},
		{"same failure, different outputs", ``, []scheduler.Result{fail("boom", "1"), fail("boom", "2"), fail("boom", "3")}, 3},
		{"status matters", ``, []scheduler.Result{ok("1"), {Status: "partial_success", OutputHash: "1"}, ok("1"), ok("1")}, 0},
		{"stall_after=2", `stall_after=2`, []scheduler.Result{ok("1"), ok("2"), ok("2")}, 3},
		{"stall_after=0 disables", `stall_after=0`, []scheduler.Result{ok("1"), ok("1"), ok("1"), ok("1")}, 0},
		{"the oldest leaves the window", ``, []scheduler.Result{ok("1"), ok("1"), ok("2"), ok("1"), ok("1"), ok("3"), ok("3")}, 0},
		{"a long run, then the same three", ``, []scheduler.Result{ok("1"), ok("2"), ok("3"), ok("4"), ok("5"), ok("6"), ok("9"), ok("9"), ok("9")}, 9},
		{"stall_after=5", `stall_after=5`, []scheduler.Result{ok("1"), ok("2"), ok("2"), ok("2"), ok("2"), ok("1"), ok("2"), ok("2"), ok("2"), ok("2"), ok("2")}, 11},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, _ := newSched(t, `digraph g { a [`+tc.attrs+`] }`)
			for i, r := range tc.results {
				evs := s.Release(admit(t, s, "a"), r)
				if i+1 == tc.stallAt {
					require.Len(t, evs, 1)
					require.Equal(t, scheduler.EventStallDetected, evs[0].Kind)
					_, w, _ := s.Admit("a")
					require.ErrorIs(t, w.Err, scheduler.ErrStalled)
					return
				}
				require.Empty(t, evs, "result %d", i+1)
			}
			require.Zero(t, tc.stallAt)
		})
	}
}

// TestTakeHeldEmptiesAStoppedGate: a join's arrivals are handed back once a
// budget stopped its node (and the gate holds nothing after), never before.
func TestTakeHeldEmptiesAStoppedGate(t *testing.T) {
	s, _, ns := newSched(t, `digraph g { budget_tokens=10; a; b; j [trigger=all]; a -> j; b -> j }`)
	d, err := s.Offer("j", "a.j", "a1")
	require.NoError(t, err)
	require.False(t, d.Fire)
	held, _, _, stopped := s.TakeHeld("j")
	require.False(t, stopped, "j may still fire")
	require.Empty(t, held)
	s.Release(admit(t, s, "a"), scheduler.Result{Status: "success", OutputHash: "1", Usage: scheduler.Usage{OutputTokens: 20}})
	require.Contains(t, ns.take(), scheduler.Notice{Node: "j", Kind: scheduler.NoticeStopped})
	held, reason, cause, stopped := s.TakeHeld("j")
	require.True(t, stopped)
	require.ErrorIs(t, cause, scheduler.ErrBudgetExceeded)
	require.Contains(t, reason, "budget")
	require.Equal(t, []scheduler.Input{{Edge: "a.j", Item: "a1"}}, held)
	held, _, _, _ = s.TakeHeld("j")
	require.Empty(t, held, "taken once")
}

// TestStallWindowKeepsTheRun: a window holds the trailing run of equal
// results only — one key while a node's inputs differ, which its journal
// records carry — and a window restored from a journal that kept the last
// three results, equal or not, counts only their trailing run.
func TestStallWindowKeepsTheRun(t *testing.T) {
	ok := func(in string) scheduler.Result {
		return scheduler.Result{InputHash: in, Status: "success", OutputHash: "ack"}
	}
	s, _, _ := newSched(t, `digraph g { kind=session; a }`)
	for i := range 5 {
		s.Release(admit(t, s, "a"), ok(itoa(i)))
	}
	require.Equal(t, []string{"input=" + itoa(4) + " status=success output=ack"}, s.SnapshotOf("a").Stalls["a"])
	s.Release(admit(t, s, "a"), ok(itoa(4)))
	require.Len(t, s.SnapshotOf("a").Stalls["a"], 2, "a run of two")

	key := func(in string) string { return "input=" + in + " status=success output=ack" }
	for _, tc := range []struct {
		name     string
		restored []string
		next     []string // the results after the restore, by input
		stallAt  int      // 1-based; 0: never
	}{
		{"two equal at the end", []string{key("x"), key("y"), key("y")}, []string{"y"}, 1},
		{"equal at both ends, not in the middle", []string{key("y"), key("x"), key("y")}, []string{"y", "y"}, 2},
		{"three equal: stalled on the next equal one", []string{key("y"), key("y"), key("y")}, []string{"y"}, 1},
		{"all different", []string{key("x"), key("y"), key("z")}, []string{"z", "z"}, 2},
		{"longer than the window", []string{key("y"), key("y"), key("y"), key("y"), key("x")}, []string{"y", "y"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, _ := newSched(t, `digraph g { kind=session; a }`)
			s.Restore(scheduler.Snapshot{Partial: true, Stalls: map[string][]string{"a": tc.restored}})
			for i, in := range tc.next {
				evs := s.Release(admit(t, s, "a"), ok(in))
				if i+1 == tc.stallAt {
					require.Len(t, evs, 1)
					require.Equal(t, scheduler.EventStallDetected, evs[0].Kind)
					return
				}
				require.Empty(t, evs, "result %d", i+1)
			}
			require.Zero(t, tc.stallAt)
		})
	}
}
