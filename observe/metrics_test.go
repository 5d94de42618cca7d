package observe_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/nodes/agent"
	"github.com/switchyard/switchyard/observe"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// A pipeline with a retried agent, a failing one, usage and a token
// budget: the scrape shows what a user would check.
func TestMetricsOfAPipeline(t *testing.T) {
	tel := observe.New(observe.Options{DefaultProvider: "mock"})
	e := start(t, tel, `digraph m {
		graph [goal="g", budget_tokens=100000, default_max_retries=0]
		start [shape=Mdiamond]
		work  [prompt="w", max_retries=2, llm_provider="mock", llm_model="mock-large"]
		check [prompt="c", llm_model="claude-sonnet-4-5"]
		exit  [shape=Msquare]
		start -> work -> check
		check -> exit [condition="outcome=fail"]
		check -> exit
	}`, `{
		"work":  [{"status":"retry","notes":"503","usage":{"input_tokens":10,"output_tokens":5,"cost":0.01}},
		          {"status":"success","response":"done","usage":{"input_tokens":100,"output_tokens":50,"cost":0.1}}],
		"check": [{"status":"fail","notes":"not good","usage":{"input_tokens":7,"output_tokens":3,"cost":0.002}}]
	}`, false, nodes.Caller{})
	done := e.waitEvent("session.completed", kind("session.completed"))
	require.Equal(t, "success", done.Status)
	id := e.s.ID()

	fams := scrape(t, tel.Handler())
	requireValue(t, fams, "switchyard_node_firings_total", map[string]string{"session": id, "node": "work", "status": "success"}, 1)
	requireValue(t, fams, "switchyard_node_firings_total", map[string]string{"session": id, "node": "check", "status": "fail"}, 1)
	requireValue(t, fams, "switchyard_node_failures_total", map[string]string{"session": id, "node": "check"}, 1)
	requireValue(t, fams, "switchyard_node_retries_total", map[string]string{"session": id, "node": "work"}, 1)
	// Two attempts of work, one of each other node.
	requireValue(t, fams, "switchyard_handler_duration_seconds", map[string]string{"session": id, "node": "work"}, 2)
	requireValue(t, fams, "switchyard_handler_duration_seconds", map[string]string{"session": id, "node": "start"}, 1)
	requireValue(t, fams, "switchyard_node_firing_duration_seconds", map[string]string{"session": id, "node": "work"}, 1)
	// Usage by provider and model, every attempt counted.
	requireValue(t, fams, "switchyard_llm_tokens_total", map[string]string{"provider": "mock", "model": "mock-large", "direction": "input"}, 110)
	requireValue(t, fams, "switchyard_llm_tokens_total", map[string]string{"provider": "mock", "model": "mock-large", "direction": "output"}, 55)
	requireValue(t, fams, "switchyard_llm_cost_usd_total", map[string]string{"provider": "mock", "model": "mock-large"}, 0.11)
	// A node without llm_provider: the model's provider.
	requireValue(t, fams, "switchyard_llm_tokens_total", map[string]string{"provider": agent.InferProvider("claude-sonnet-4-5"), "model": "claude-sonnet-4-5", "direction": "input"}, 7)
	// The graph's token budget: its limit and what was spent.
	requireValue(t, fams, "switchyard_budget_limit", map[string]string{"session": id, "scope": "graph", "dimension": "tokens"}, 100000)
	requireValue(t, fams, "switchyard_budget_spent", map[string]string{"session": id, "scope": "graph", "dimension": "tokens"}, 175)
	requireValue(t, fams, "switchyard_sessions", map[string]string{"state": "success"}, 1)
	n, ok := value(fams, "switchyard_journal_write_seconds", nil)
	require.True(t, ok)
	require.GreaterOrEqual(t, n, 4.0, "one journal commit per firing at least")
}

// Envelopes that pile up on a manual node's latest edge: the buffer depth
// and the drops are on the scrape; the trigger empties the buffer.
func TestMetricsOfBuffers(t *testing.T) {
	tel := observe.New(observe.Options{DefaultProvider: "mock"})
	e := start(t, tel, `digraph s { kind="session"
		src [prompt="s"]; m [prompt="m", trigger=manual]; q [prompt="q", trigger=manual]
		src -> m [delivery=latest]
		src -> q
	}`, "", true, nodes.Caller{})
	id := e.s.ID()
	for _, v := range []string{"v0", "v1", "v2"} {
		e.publish(broker.Edge(id, "src.m"), v, nil)
		e.publish(broker.Edge(id, "src.q"), v, nil)
	}
	// Wait for m's second drop, then for q's three arrivals on the scrape
	// (q's gate says it waits once, not at each arrival).
	drops := 0
	e.waitEvent("two drops on m", func(ev *pb.Event) bool {
		if ev.Kind == "envelope.dropped" && ev.Node == "m" {
			drops++
		}
		return drops == 2
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		v, _ := value(scrape(t, tel.Handler()), "switchyard_edge_buffer_depth", map[string]string{"session": id, "node": "q", "edge": "src.q"})
		if v == 3 {
			break
		}
		require.True(t, time.Now().Before(deadline), "q holds %v, not 3", v)
		time.Sleep(10 * time.Millisecond) // polling the scrape
	}
	fams := scrape(t, tel.Handler())
	requireValue(t, fams, "switchyard_edge_buffer_depth", map[string]string{"session": id, "node": "m", "edge": "src.m"}, 1)
	requireValue(t, fams, "switchyard_edge_buffer_depth", map[string]string{"session": id, "node": "q", "edge": "src.q"}, 3)
	requireValue(t, fams, "switchyard_edge_dropped_total", map[string]string{"session": id, "node": "m", "edge": "src.m"}, 2)
	requireValue(t, fams, "switchyard_nodes", map[string]string{"session": id, "state": "waiting"}, 2)
	requireValue(t, fams, "switchyard_sessions", map[string]string{"state": "running"}, 1)

	require.NoError(t, e.s.System().Trigger("m", nil))
	e.waitEvent("m completed", func(ev *pb.Event) bool { return ev.Kind == "node.completed" && ev.Node == "m" })
	fams = scrape(t, tel.Handler())
	requireValue(t, fams, "switchyard_edge_buffer_depth", map[string]string{"session": id, "node": "m", "edge": "src.m"}, 0)
	requireValue(t, fams, "switchyard_node_firings_total", map[string]string{"session": id, "node": "m", "status": "success"}, 1)
}
