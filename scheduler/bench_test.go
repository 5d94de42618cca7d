package scheduler_test

import (
	"testing"
	"time"

	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/scheduler"
)

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
