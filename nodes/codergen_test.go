package nodes_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/nodes/agent"
)

const codergenGraph = `digraph c {
	goal="Ship"
	default_fidelity="truncate"
	start [shape=Mdiamond]
	work [prompt="Build $goal", llm_model="claude-opus-4", reasoning_effort="low", role="reviewer", thread_id="t1"]
	labelled [label="Write the docs"]
	named [prompt="p", llm_provider="gemini"]
	exit [shape=Msquare]
	start -> work -> labelled -> named -> exit
}`

func TestCodergenWritesStageFiles(t *testing.T) {
	g := load(t, codergenGraph)
	mock := agent.NewMock(map[string][]agent.MockResult{"work": {{Status: "success", Response: "built it",
		Usage: &agent.MockUsage{InputTokens: 10, OutputTokens: 5, Cost: 0.01}}}})
	r := registry(t, nodes.Deps{Providers: providers(mock, nil)})
	in := input(t, g, "work")
	in.Prompt = "Build Ship"
	var reported []agent.Usage
	in.OnUsage = func(u agent.Usage) { reported = append(reported, u) }
	o := handle(t, r, in)
	require.Equal(t, nodes.StatusSuccess, o.Status)
	require.Equal(t, "built it", o.Response)
	require.Equal(t, agent.Usage{InputTokens: 10, OutputTokens: 5, Cost: 0.01}, o.Usage)
	require.Equal(t, []agent.Usage{o.Usage}, reported, "usage is reported as it happens")
	require.Equal(t, "work", o.ContextUpdates["last_stage"])
	require.Equal(t, "built it", o.ContextUpdates["last_response"])

	prompt, err := os.ReadFile(filepath.Join(in.StageDir, "prompt.md"))
	require.NoError(t, err)
	require.Contains(t, string(prompt), "Goal: Ship")
	require.True(t, strings.HasSuffix(string(prompt), "Build Ship"), "the node's prompt comes last")
	resp, err := os.ReadFile(filepath.Join(in.StageDir, "response.md"))
	require.NoError(t, err)
	require.Equal(t, "built it", string(resp))
	sf, ok, err := nodes.ReadStatusFile(in.StageDir)
	require.NoError(t, err)
	require.True(t, ok, "the final outcome is written as status.json")
	require.Equal(t, "success", sf.Outcome)
	require.Equal(t, "work", sf.ContextUpdates["last_stage"])
}

func TestCodergenRequest(t *testing.T) {
	g := load(t, codergenGraph)
	tests := []struct {
		node, defaultProvider string
		context               map[string]string
		check                 func(t *testing.T, req *agent.Request, asked []string)
	}{
		{"work", "", map[string]string{"plan": "three steps", "internal.secret": "x", "graph.goal": "Ship"}, func(t *testing.T, req *agent.Request, asked []string) {
			require.Equal(t, []string{"claude"}, asked, "the provider is inferred from the model")
			require.Equal(t, "claude", req.Provider)
			require.Equal(t, "claude-opus-4", req.Model)
			require.Equal(t, "low", req.ReasoningEffort)
			require.Equal(t, "reviewer", req.Role)
			require.Equal(t, "t1", req.ThreadID)
			require.Equal(t, "truncate", req.Fidelity, "the graph's default fidelity")
			require.Equal(t, "s1", req.SessionID)
			require.Equal(t, "work", req.NodeID)
			require.Equal(t, "s1/work/1/1", req.AttemptID)
			require.NotEmpty(t, req.WorkDir)
			require.True(t, strings.HasSuffix(req.StageDir, "work"))
			require.Equal(t, "claude-opus-4", req.Attrs["llm_model"])
			require.Equal(t, "Goal: Ship\n\nBuild Ship", req.Prompt, "truncate: the goal and the node's prompt, no context")
			require.Empty(t, req.ResumeSession)
		}},
		{"labelled", "codex", nil, func(t *testing.T, req *agent.Request, asked []string) {
			require.Equal(t, []string{"codex"}, asked, "Deps.DefaultProvider")
			require.True(t, strings.HasSuffix(req.Prompt, "Write the docs"), "no prompt: the label")
			require.Contains(t, req.Prompt, "Goal: Ship", "the goal comes from the graph when the context lacks it")
		}},
		{"named", "codex", nil, func(t *testing.T, req *agent.Request, asked []string) {
			require.Equal(t, []string{"gemini"}, asked, "llm_provider wins")
		}},
		{"named", "", nil, func(t *testing.T, req *agent.Request, asked []string) {
			require.Equal(t, "gemini", req.Provider)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.node+"/"+tc.defaultProvider, func(t *testing.T) {
			p := answering(&agent.Result{Text: "ok", Success: true}, nil)
			var asked []string
			r := registry(t, nodes.Deps{Providers: providers(p, &asked), DefaultProvider: tc.defaultProvider})
			in := input(t, g, tc.node)
			for k, v := range tc.context {
				in.Context[k] = v
			}
			require.Equal(t, nodes.StatusSuccess, handle(t, r, in).Status)
			tc.check(t, p.last(), asked)
		})
	}
}

// TestCodergenOutcomePrecedence: status.json written by the agent, else the
// result's explicit status, else its success (auto_status: success).
func TestCodergenOutcomePrecedence(t *testing.T) {
	tests := []struct {
		name       string
		statusJSON string
		res        agent.Result
		autoStatus bool
		status     nodes.Status
		label      string
		next       []string
		updates    map[string]string
	}{
		{name: "status.json fail beats a successful result", statusJSON: `{"outcome":"fail","notes":"tests red"}`,
			res: agent.Result{Success: true, Status: "success"}, status: nodes.StatusFail},
		{name: "legacy preferred_next_label", statusJSON: `{"outcome":"success","preferred_next_label":"Ship it","context_updates":{"n":3,"s":"x"}}`,
			status: nodes.StatusSuccess, label: "Ship it", updates: map[string]string{"n": "3", "s": "x"}},
		{name: "preferred_label and suggested ids", statusJSON: `{"outcome":"partial_success","preferred_label":"Fix","preferred_next_label":"old","suggested_next_ids":["fix"]}`,
			status: nodes.StatusPartial, label: "Fix", next: []string{"fix"}},
		{name: "custom outcome kept", statusJSON: `{"outcome":"needs_dod"}`, status: "needs_dod"},
		{name: "outcome is required", statusJSON: `{"status":"success"}`, res: agent.Result{Success: true}, status: nodes.StatusFail},
		{name: "malformed status.json fails", statusJSON: `{"outcome":`, res: agent.Result{Success: true}, status: nodes.StatusFail},
		{name: "explicit result status", res: agent.Result{Success: true, Status: "retry", PreferredLabel: "Again"}, status: nodes.StatusRetry, label: "Again"},
		{name: "result success", res: agent.Result{Success: true, ContextUpdates: map[string]string{"k": "v"}}, status: nodes.StatusSuccess, updates: map[string]string{"k": "v"}},
		{name: "result failure", res: agent.Result{Success: false}, status: nodes.StatusFail},
		{name: "auto_status: nothing written is success", res: agent.Result{Success: false}, autoStatus: true, status: nodes.StatusSuccess},
		{name: "auto_status keeps an explicit status", res: agent.Result{Success: true, Status: "fail"}, autoStatus: true, status: nodes.StatusFail},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			attrs := ""
			if tc.autoStatus {
				attrs = ", auto_status=true"
			}
			g := load(t, `digraph a { start [shape=Mdiamond]; w [prompt="w"`+attrs+`]; exit [shape=Msquare]; start -> w -> exit }`)
			p := &scripted{run: func(req *agent.Request, _ func(agent.Event)) (*agent.Result, error) {
				if tc.statusJSON != "" {
					require.NoError(t, os.MkdirAll(req.StageDir, 0o755))
					require.NoError(t, os.WriteFile(filepath.Join(req.StageDir, "status.json"), []byte(tc.statusJSON), 0o644))
				}
				res := tc.res
				res.Text = "text"
				return &res, nil
			}}
			r := registry(t, nodes.Deps{Providers: providers(p, nil)})
			o := handle(t, r, input(t, g, "w"))
			require.Equal(t, tc.status, o.Status, o.FailureReason)
			require.Equal(t, tc.label, o.PreferredLabel)
			require.Equal(t, tc.next, o.SuggestedNextIDs)
			for k, v := range tc.updates {
				require.Equal(t, v, o.ContextUpdates[k], k)
			}
			require.Equal(t, "w", o.ContextUpdates["last_stage"])
		})
	}
}

// TestCodergenIgnoresStaleStatusFile: a status.json left by an earlier
// attempt does not decide this one.
func TestCodergenIgnoresStaleStatusFile(t *testing.T) {
	g := load(t, codergenGraph)
	in := input(t, g, "work")
	require.NoError(t, os.MkdirAll(in.StageDir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(in.StageDir, "status.json"), []byte(`{"outcome":"fail"}`), 0o644))
	r := registry(t, nodes.Deps{Providers: providers(answering(&agent.Result{Text: "ok", Success: true}, nil), nil)})
	require.Equal(t, nodes.StatusSuccess, handle(t, r, in).Status)
}

func TestCodergenLastResponseIsCapped(t *testing.T) {
	g := load(t, codergenGraph)
	long := strings.Repeat("x", 500)
	r := registry(t, nodes.Deps{Providers: providers(answering(&agent.Result{Text: long, Success: true}, nil), nil)})
	o := handle(t, r, input(t, g, "work"))
	require.Len(t, o.ContextUpdates["last_response"], 200)
	require.Equal(t, long, o.Response)
}

func TestCodergenProviderErrors(t *testing.T) {
	g := load(t, codergenGraph)
	tests := []struct {
		name      string
		deps      nodes.Deps
		retryable bool
		reason    string
	}{
		{"rate limit", mockErr("rate_limit"), true, "rate_limit"},
		{"network", mockErr("network"), true, "network"},
		{"server", mockErr("server"), true, "server"},
		{"auth", mockErr("auth"), false, "auth"},
		{"bad request", mockErr("bad_request"), false, "bad_request"},
		{"unclassified error", nodes.Deps{Providers: providers(answering(nil, os.ErrPermission), nil)}, false, "permission denied"},
		{"unknown provider", nodes.Deps{Providers: agent.NewRegistry().Lookup}, false, `unknown provider "claude"`},
		{"no providers", nodes.Deps{}, false, "no agent providers"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := input(t, g, "work")
			o := handle(t, registry(t, tc.deps), in)
			require.Equal(t, nodes.StatusFail, o.Status)
			require.Equal(t, tc.retryable, o.Retryable)
			require.Contains(t, o.FailureReason, tc.reason)
		})
	}
}

func mockErr(class string) nodes.Deps {
	return nodes.Deps{Providers: providers(agent.NewMock(map[string][]agent.MockResult{"work": {{Error: class}}}), nil)}
}

func TestReadStatusFileMissing(t *testing.T) {
	sf, ok, err := nodes.ReadStatusFile(t.TempDir())
	require.NoError(t, err)
	require.False(t, ok)
	require.Nil(t, sf)
}

func TestCodergenForwardsEvents(t *testing.T) {
	g := load(t, codergenGraph)
	p := &scripted{run: func(req *agent.Request, onEvent func(agent.Event)) (*agent.Result, error) {
		onEvent(agent.Event{Kind: "text", Text: "thinking"})
		onEvent(agent.Event{Kind: "tool_call", Tool: "bash"})
		onEvent(agent.Event{Kind: "usage", Usage: agent.Usage{InputTokens: 4}})
		onEvent(agent.Event{Kind: "usage", Usage: agent.Usage{InputTokens: 6}})
		return &agent.Result{Text: "done", Success: true, Usage: agent.Usage{InputTokens: 10}}, nil
	}}
	r := registry(t, nodes.Deps{Providers: providers(p, nil)})
	in := input(t, g, "work")
	var emitted []string
	var usage agent.Usage
	in.Emit = func(kind string, fields map[string]any) {
		emitted = append(emitted, kind+":"+fmt.Sprint(fields["tool"])+fmt.Sprint(fields["message"]))
	}
	in.OnUsage = func(u agent.Usage) { usage = usage.Add(u) }
	o := handle(t, r, in)
	require.Equal(t, []string{"agent.text:<nil>thinking", "agent.tool_call:bash<nil>"}, emitted,
		"streamed text is sent before the tool call that follows it")
	require.Equal(t, agent.Usage{InputTokens: 10}, usage)
	require.Equal(t, usage, o.Usage, "the outcome's usage is the run's total")
}

// TestCodergenInputTemplate: $input in a prompt is the text of the
// envelopes that fired the node, joined by a blank line; the prompt then
// places them itself (no separate "Input" lines).
func TestCodergenInputTemplate(t *testing.T) {
	g := load(t, codergenGraph)
	p := answering(&agent.Result{Text: "ok", Success: true}, nil)
	r := registry(t, nodes.Deps{Providers: providers(p, nil)})
	in := input(t, g, "work")
	in.Prompt = "Triage these alerts:\n$input\nReply with a severity."
	in.Messages = []nodes.Message{{Kind: "handoff", Text: "disk full on db-1"}, {Kind: "tick"}, {Kind: "handoff", Text: "cpu at 99%"}}
	require.Equal(t, nodes.StatusSuccess, handle(t, r, in).Status)
	require.True(t, strings.HasSuffix(p.last().Prompt, "Triage these alerts:\ndisk full on db-1\n\ncpu at 99%\nReply with a severity."), p.last().Prompt)
	require.NotContains(t, p.last().Prompt, "Input (handoff)")
}

// TestCodergenStreamsTextByLine: an agent's streamed pieces become
// agent.text events a line at a time (the rest at the end of the run), and
// together they are the answer.
func TestCodergenStreamsTextByLine(t *testing.T) {
	g := load(t, codergenGraph)
	pieces := []string{"Hel", "lo\nwor", "ld\nand", " more", strings.Repeat("x", 5000), "end"}
	p := &scripted{run: func(req *agent.Request, onEvent func(agent.Event)) (*agent.Result, error) {
		for _, s := range pieces {
			onEvent(agent.Event{Kind: "text", Text: s})
		}
		return &agent.Result{Text: strings.Join(pieces, ""), Success: true}, nil
	}}
	r := registry(t, nodes.Deps{Providers: providers(p, nil)})
	in := input(t, g, "work")
	var texts []string
	in.Emit = func(kind string, fields map[string]any) {
		if kind == "agent.text" {
			texts = append(texts, fields["message"].(string))
		}
	}
	o := handle(t, r, in)
	require.Equal(t, []string{"Hello\n", "world\n", "and more" + strings.Repeat("x", 5000), "end"}, texts)
	require.Equal(t, o.Response, strings.Join(texts, ""))
}

// TestCodergenCarriesRetryAfter: a provider error's Retry-After reaches
// the outcome, for the runtime's retry to wait that long.
func TestCodergenCarriesRetryAfter(t *testing.T) {
	g := load(t, codergenGraph)
	p := &scripted{run: func(req *agent.Request, onEvent func(agent.Event)) (*agent.Result, error) {
		return nil, &agent.Error{Provider: "x", Class: agent.ClassRateLimit, Retryable: true, Msg: "rate_limit: 429", RetryAfter: 7 * time.Second}
	}}
	r := registry(t, nodes.Deps{Providers: providers(p, nil)})
	o := handle(t, r, input(t, g, "work"))
	require.Equal(t, nodes.StatusFail, o.Status)
	require.True(t, o.Retryable)
	require.Equal(t, 7*time.Second, o.RetryAfter)
}

// TestOverrideProviders: with Deps.OverrideProviders every agent node runs
// on the default provider, whatever its llm_provider or model say.
func TestOverrideProviders(t *testing.T) {
	g := load(t, codergenGraph)
	for _, node := range []string{"work", "named", "labelled"} {
		p := answering(&agent.Result{Text: "ok", Success: true}, nil)
		var asked []string
		r := registry(t, nodes.Deps{Providers: providers(p, &asked), DefaultProvider: "mock", OverrideProviders: true})
		handle(t, r, input(t, g, node))
		require.Equal(t, []string{"mock"}, asked, node)
	}
}
