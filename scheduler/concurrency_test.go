package scheduler_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/scheduler"
)

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

func TestInFlightWakesEveryFreeSlot(t *testing.T) {
	s, _, ns := newSched(t, `digraph g { max_in_flight=2; a; b; c; d }`)
	ta, tb := admit(t, s, "a"), admit(t, s, "b")
	for _, n := range []string{"c", "d"} {
		_, w, _ := s.Admit(n)
		require.NotNil(t, w, n)
		require.Equal(t, scheduler.CauseInFlightCap, w.Cause)
	}
	st, _ := s.State("d")
	require.Equal(t, "2", st.Fields["position"], "d is second in line")
	s.Release(ta, scheduler.Result{Status: "success", OutputHash: "1"})
	s.Release(tb, scheduler.Result{Status: "success", OutputHash: "2"})
	require.ElementsMatch(t, []scheduler.Notice{{Node: "c", Kind: scheduler.NoticeAdmit}, {Node: "c", Kind: scheduler.NoticeAdmit},
		{Node: "d", Kind: scheduler.NoticeAdmit}}, ns.take(), "two free slots wake the first two waiters")
	admit(t, s, "d")
	admit(t, s, "c")
}

func TestStoppedWaiterLeavesTheQueue(t *testing.T) {
	s, _, ns := newSched(t, `digraph g { max_in_flight=1; subgraph cluster_s { graph [budget_tokens=10]; x; y }; w }`)
	tx := admit(t, s, "x")
	for _, n := range []string{"y", "w"} {
		_, w, _ := s.Admit(n)
		require.NotNil(t, w)
		require.False(t, w.Stop)
	}
	evs := s.Charge(tx, scheduler.Usage{OutputTokens: 20})
	require.Equal(t, scheduler.EventBudgetExceeded, evs[len(evs)-1].Kind)
	require.ElementsMatch(t, []scheduler.Notice{{Node: "x", Kind: scheduler.NoticeCancel},
		{Node: "x", Kind: scheduler.NoticeStopped}, {Node: "y", Kind: scheduler.NoticeStopped}}, ns.take(),
		"the running x is cancelled; x and y are told they are stopped (they refuse what they hold)")
	st, _ := s.State("y")
	require.Equal(t, scheduler.StateStopped, st.State, "the subgraph's spent budget stops y while it waits")
	require.Equal(t, scheduler.CauseBudgetSpent, st.Cause)

	s.Release(tx, scheduler.Result{Status: "fail"})
	require.Equal(t, []scheduler.Notice{{Node: "w", Kind: scheduler.NoticeAdmit}}, ns.take(), "w is not stuck behind stopped y")
	admit(t, s, "w")
	_, w, _ := s.Admit("y")
	require.True(t, w.Stop)
	require.ErrorIs(t, w.Err, scheduler.ErrBudgetExceeded)
}

func TestLockFairnessAndAllOrNothing(t *testing.T) {
	s, _, ns := newSched(t, `digraph g { a [locks="src/a.go"]; b [locks="src/,docs/"]; c [locks="docs/guide.md"]; d [locks="tools/"] }`)
	ta := admit(t, s, "a")
	_, w, _ := s.Admit("b")
	require.Equal(t, "lock held: a holds src/a.go", w.Reason)
	require.Equal(t, []scheduler.LockHold{{Path: "src/a.go", Node: "a"}}, s.Locks(), "b waits holding nothing (all or nothing)")

	_, w, evs := s.Admit("c")
	require.NotNil(t, w, "docs/ is free, but b asked first")
	require.Equal(t, "lock held: b waits first for docs/", w.Reason)
	require.Equal(t, "true", evs[0].Fields["queued"])
	admit(t, s, "d") // no conflict with anyone

	s.Release(ta, scheduler.Result{Status: "success", OutputHash: "1"})
	require.ElementsMatch(t, []scheduler.Notice{{Node: "b", Kind: scheduler.NoticeAdmit}, {Node: "c", Kind: scheduler.NoticeAdmit}}, ns.take())
	_, w, _ = s.Admit("c")
	require.NotNil(t, w, "c still may not overtake b")
	tb := admit(t, s, "b")
	require.Equal(t, []scheduler.LockHold{{Path: "docs/", Node: "b"}, {Path: "src/", Node: "b"}, {Path: "tools/", Node: "d"}}, s.Locks())
	_, w, _ = s.Admit("c")
	require.Equal(t, "lock held: b holds docs/", w.Reason)
	require.Contains(t, s.Explain("c"), "holder=b")
	s.Release(tb, scheduler.Result{Status: "success", OutputHash: "2"})
	admit(t, s, "c")
}

func TestLockConflicts(t *testing.T) {
	for _, tc := range []struct {
		a, b     string
		conflict bool
	}{
		{"src/", "src/a.go", true},
		{"src", "src/a.go", true},
		{"src/a.go", "src/a.go", true},
		{"src/", "src", true},
		{"src/a", "src/ab", false},
		{"src/", "srcx/", false},
		{"docs", "docs2", false},
		{"a/b/", "a/b/c/d.go", true},
	} {
		t.Run(tc.a+"~"+tc.b, func(t *testing.T) {
			s, _, _ := newSched(t, `digraph g { x [locks="`+tc.a+`"]; y [locks="`+tc.b+`"] }`)
			admit(t, s, "x")
			tk, _, _ := s.Admit("y")
			require.Equal(t, tc.conflict, tk == nil)
		})
	}
}

// TestConcurrentUse drives one scheduler from several goroutines, as
// timers and actors do; -race checks the locking.
func TestConcurrentUse(t *testing.T) {
	s, _, _ := newSched(t, `digraph g { max_in_flight=3; max_iterations=1000000; a [max_iterations=1000000, locks="x/"]; b [max_iterations=1000000];
		c [max_iterations=1000000]; j [trigger=all, max_iterations=1000000]; a -> j; b -> j }`)
	var wg sync.WaitGroup
	runs := make([]int, 3)
	for i, n := range []string{"a", "b", "c"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 200; k++ {
				if _, err := s.Offer("j", n+".j", k); err != nil && n != "c" {
					t.Error(err)
				}
				if tk, w, _ := s.Admit(n); w == nil {
					runs[i]++
					s.Release(tk, scheduler.Result{Status: "success", OutputHash: itoa(k)})
				}
				_ = s.States()
				_ = s.Explain(n)
			}
		}()
	}
	wg.Wait()
	snap := s.Snapshot()
	require.Equal(t, runs[0]+runs[1]+runs[2], snap.Total)
	require.Positive(t, runs[0])
}
