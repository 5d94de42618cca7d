package nodes_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/nodes/agent"
)

const fidelityGraph = `digraph f {
	goal="Ship it"
	start [shape=Mdiamond]
	exit [shape=Msquare]
	plan [prompt="Plan", thread_id="t1"]
	work [prompt="Do it", thread_id="t1"]
	check [prompt="Check", fidelity="full"]
	start -> plan -> work -> check -> exit
	plan -> check [fidelity="truncate"]
}`

// fidelityContext is a run context with more keys than a low summary
// shows and values longer than its cut.
func fidelityContext() map[string]string {
	ctx := map[string]string{
		"graph.goal":           "Ship it",
		"internal.thread.t9":   "sess-9",
		"internal.retry_count": "0",
		"current_node":         "work",
		"last_stage":           "plan",
		"last_response":        strings.Repeat("r", 1500),
		"outcome":              "success",
	}
	for i := 1; i <= 12; i++ {
		ctx[fmt.Sprintf("k%02d", i)] = fmt.Sprintf("v%02d:", i) + strings.Repeat("x", 500)
	}
	return ctx
}

// line is the prompt line of a context key whose value is cut to n bytes
// (… marks a cut value in summaries).
func line(ctx map[string]string, k string, n int, mark bool) string {
	v := ctx[k]
	if len(v) > n {
		v = v[:n]
		if mark {
			v += "…"
		}
	}
	return "- " + k + ": " + v + "\n"
}

func TestPromptPerFidelity(t *testing.T) {
	g := load(t, fidelityGraph)
	ctx := fidelityContext()
	tests := []struct {
		fidelity string
		check    func(t *testing.T, prompt string)
	}{
		{"truncate", func(t *testing.T, p string) {
			require.Equal(t, "Goal: Ship it\n\nDo it", p)
		}},
		{"compact", func(t *testing.T, p string) {
			require.True(t, strings.HasPrefix(p, "Goal: Ship it\n\nContext from earlier steps:\n"), p)
			for _, k := range []string{"k01", "k12", "last_stage", "last_response", "outcome"} {
				require.Contains(t, p, line(ctx, k, 200, false), k)
			}
			require.NotContains(t, p, "internal.")
			require.NotContains(t, p, "current_node")
			require.NotContains(t, p, "graph.goal")
			require.True(t, strings.HasSuffix(p, "\n\nDo it"))
		}},
		{"summary:low", func(t *testing.T, p string) {
			require.Contains(t, p, "Goal: Ship it\n\nSummary of earlier steps (3 of 15 context keys):\n")
			require.Contains(t, p, line(ctx, "last_stage", 100, true))
			require.Contains(t, p, line(ctx, "last_response", 100, true))
			require.Contains(t, p, line(ctx, "outcome", 100, true))
			require.NotContains(t, p, "k01")
		}},
		{"summary:medium", func(t *testing.T, p string) {
			require.Contains(t, p, "Summary of earlier steps (10 of 15 context keys):\n")
			require.Contains(t, p, line(ctx, "last_response", 300, true))
			require.Contains(t, p, line(ctx, "k07", 300, true))
			require.NotContains(t, p, "k08")
		}},
		{"summary:high", func(t *testing.T, p string) {
			require.Contains(t, p, "Summary of earlier steps:\n")
			require.Contains(t, p, line(ctx, "last_response", 1000, true))
			require.Contains(t, p, line(ctx, "k12", 1000, true), "values under the cut are whole")
			require.NotContains(t, p, "internal.")
		}},
		{"full", func(t *testing.T, p string) {
			// No session on thread t1 yet: the first run gets the compact view.
			require.Contains(t, p, "Context from earlier steps:\n")
		}},
		{"bogus", func(t *testing.T, p string) {
			require.Contains(t, p, "Context from earlier steps:\n", "an unknown fidelity reads as compact")
		}},
	}
	var sizes []int
	for _, tc := range tests {
		t.Run(tc.fidelity, func(t *testing.T) {
			p := answering(&agent.Result{Text: "ok", Success: true}, nil)
			r := registry(t, nodes.Deps{Providers: providers(p, nil)})
			in := input(t, g, "work")
			in.Node.Attrs.Set("fidelity", tc.fidelity)
			defer in.Node.Attrs.Set("fidelity", "")
			for k, v := range ctx {
				in.Context[k] = v
			}
			require.Equal(t, nodes.StatusSuccess, handle(t, r, in).Status)
			req := p.last()
			require.Equal(t, tc.fidelity, req.Fidelity)
			require.Empty(t, req.ResumeSession)
			tc.check(t, req.Prompt)
			if strings.HasPrefix(tc.fidelity, "summary:") {
				sizes = append(sizes, len(req.Prompt))
			}
		})
	}
	require.Len(t, sizes, 3)
	require.Less(t, sizes[0], sizes[1], "summary:low < medium")
	require.Less(t, sizes[1], sizes[2], "summary:medium < high")
}

// TestFidelityFromEdge: the fidelity of the edge a node was entered over
// beats the node's (spec 5.4).
func TestFidelityFromEdge(t *testing.T) {
	g := load(t, fidelityGraph)
	p := answering(&agent.Result{Text: "ok", Success: true}, nil)
	r := registry(t, nodes.Deps{Providers: providers(p, nil)})
	in := input(t, g, "check")
	in.Context["k"] = "v"
	in.Messages = []nodes.Message{{Kind: "handoff", From: "plan", Edge: "plan.check", Text: "planned"}}
	handle(t, r, in)
	require.Equal(t, "truncate", p.last().Fidelity)
	require.Equal(t, "Goal: Ship it\n\nCheck", p.last().Prompt)

	in.Messages = []nodes.Message{{Kind: "handoff", From: "work", Edge: "work.check", Text: "done"}}
	handle(t, r, in)
	require.Equal(t, "full", p.last().Fidelity, "the node's own")
}

// TestInputsInEveryFidelity: an outside input that fired the node is in
// the prompt whatever the fidelity.
func TestInputsInEveryFidelity(t *testing.T) {
	g := load(t, fidelityGraph)
	for _, f := range []string{"truncate", "compact", "summary:low", "full"} {
		p := answering(&agent.Result{Text: "ok", Success: true}, nil)
		r := registry(t, nodes.Deps{Providers: providers(p, nil)})
		in := input(t, g, "work")
		in.Node.Attrs.Set("fidelity", f)
		in.Context[nodes.ThreadKeyPrefix+"t1"] = "sess-1"
		in.Messages = []nodes.Message{{Kind: "event", Text: "the build is red"}}
		handle(t, r, in)
		require.Contains(t, p.last().Prompt, "Input (event): the build is red\n\nDo it", f)
		in.Node.Attrs.Set("fidelity", "")
	}
}

// TestFullFidelityResumesThread: the second node on a thread resumes the
// CLI session the first one returned; the session id travels in the run
// context (so it survives checkpoints and processes).
func TestFullFidelityResumesThread(t *testing.T) {
	g := load(t, fidelityGraph)
	g.Node("work").Attrs.Set("fidelity", "full")
	mock := agent.NewMock(map[string][]agent.MockResult{"plan": {{Status: "success", Response: "a plan"}}})
	rec := &scripted{run: func(req *agent.Request, onEvent func(agent.Event)) (*agent.Result, error) {
		return mock.Run(context.Background(), req, onEvent)
	}}
	var asked []string
	r := registry(t, nodes.Deps{Providers: providers(rec, &asked), DefaultProvider: "mock"})

	plan := input(t, g, "plan")
	o := handle(t, r, plan)
	require.Equal(t, nodes.StatusSuccess, o.Status)
	require.Equal(t, "mock-plan", o.ContextUpdates[nodes.ThreadKeyPrefix+"t1"], "the session is recorded under the thread")
	require.Equal(t, "mock", o.ContextUpdates[nodes.ThreadKeyPrefix+"t1.provider"])
	require.Equal(t, "mock-plan", o.ContextUpdates[nodes.ThreadKeyPrefix+"plan"], "and under the node")
	require.Empty(t, rec.last().ResumeSession, "a compact node starts a new session")

	work := input(t, g, "work")
	for k, v := range o.ContextUpdates {
		work.Context[k] = v
	}
	work.Context["graph.goal"] = "Ship it"
	o2 := handle(t, r, work)
	require.Equal(t, nodes.StatusSuccess, o2.Status)
	req := rec.last()
	require.Equal(t, "t1", req.ThreadID)
	require.Equal(t, "full", req.Fidelity)
	require.Equal(t, "mock-plan", req.ResumeSession)
	require.Equal(t, "Do it", req.Prompt, "the CLI has the history: the node's prompt only")
	require.Equal(t, "mock-work", o2.ContextUpdates[nodes.ThreadKeyPrefix+"t1"], "the thread moves on to the new session")

	// Another provider cannot resume the mock's session: a new session with
	// the compact view.
	work.Node.Attrs.Set("llm_provider", "other")
	defer work.Node.Attrs.Set("llm_provider", "")
	handle(t, r, work)
	require.Empty(t, rec.last().ResumeSession)
	require.Contains(t, rec.last().Prompt, "Goal: Ship it")
}

// TestFullFidelityWithoutThread: a full-fidelity node without a thread
// continues the session of the node whose output fired it.
func TestFullFidelityWithoutThread(t *testing.T) {
	g := load(t, fidelityGraph)
	rec := answering(&agent.Result{Text: "ok", Success: true, SessionID: "s-check"}, nil)
	r := registry(t, nodes.Deps{Providers: providers(rec, nil)})
	in := input(t, g, "check")
	in.Context[nodes.ThreadKeyPrefix+"work"] = "s-work"
	in.Context[nodes.ThreadKeyPrefix+"work.provider"] = "mock"
	in.Messages = []nodes.Message{{Kind: "handoff", From: "work", Edge: "work.check", Text: "done"}}
	o := handle(t, r, in)
	require.Equal(t, "s-work", rec.last().ResumeSession)
	require.Equal(t, "Check", rec.last().Prompt)
	require.Equal(t, "s-check", o.ContextUpdates[nodes.ThreadKeyPrefix+"check"])
}
