package scheduler_test

import (
	"testing"
	"time"

	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/scheduler"
)

// BenchmarkOfferAny is one arrival at a trigger=any node.
func BenchmarkOfferAny(b *testing.B) {
	s := benchSched(b, `digraph g { a; b; a -> b }`)
	for i := 0; i < b.N; i++ {
		_, _ = s.Offer("b", "a.b", i)
	}
}

// BenchmarkOfferAll3 is one arrival at a three-edge join (every third
// one completes it).
func BenchmarkOfferAll3(b *testing.B) {
	s := benchSched(b, `digraph g { a; b; c; j [trigger=all]; a -> j; b -> j; c -> j }`)
	edges := []string{"a.j", "b.j", "c.j"}
	for i := 0; i < b.N; i++ {
		_, _ = s.Offer("j", edges[i%3], i)
	}
}

// BenchmarkAcquireRelease is admission and release of one firing under an
// in-flight cap, a lock, a node budget and both iteration caps.
func BenchmarkAcquireRelease(b *testing.B) {
	s := benchSched(b, `digraph g { max_iterations=1000000000; max_in_flight=4; a [max_iterations=1000000000, budget_tokens=1000000000000, locks="src/"] }`)
	r := scheduler.Result{Status: "success", Usage: scheduler.Usage{OutputTokens: 1}}
	for i := 0; i < b.N; i++ {
		t, w, _ := s.Admit("a")
		if w != nil {
			b.Fatal(w.Reason)
		}
		r.OutputHash = hashes[i%len(hashes)]
		s.Release(t, r)
	}
}

var hashes = []string{"h0", "h1", "h2", "h3"}

func benchSched(b *testing.B, src string) *scheduler.Scheduler {
	b.Helper()
	g, diags := graph.Load("t.dot", []byte(src), graph.AsSession())
	if diags.HasErrors() {
		b.Fatal(diags)
	}
	cfg, err := scheduler.ConfigFrom(g)
	if err != nil {
		b.Fatal(err)
	}
	s, err := scheduler.New(cfg, clock.NewFake(t0), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	b.ReportAllocs()
	b.ResetTimer()
	return s
}

// BenchmarkDecision is the whole decision for one envelope: the gate, then
// admission (iterations, budgets, in-flight, locks) and release.
func BenchmarkDecision(b *testing.B) {
	s := benchSched(b, `digraph g { max_iterations=1000000000; max_in_flight=4; a; b [max_iterations=1000000000, budget_tokens=1000000000000, locks="src/"]; a -> b }`)
	for i := 0; i < b.N; i++ {
		_, _ = s.Offer("b", "a.b", i)
		t, _, _ := s.Admit("b")
		s.Release(t, scheduler.Result{Status: "success", OutputHash: itoa(i), Usage: scheduler.Usage{OutputTokens: 1}})
	}
}

func itoa(i int) string { return time.Duration(i).String() }
