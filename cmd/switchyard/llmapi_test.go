package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/nodes/agent/llmapi/llmapitest"
)

// consensusGraph is shaped like the public Attractor reference graphs
// (kilroy's consensus_task): agents on three model APIs named by the spec's
// provider keys, a plan reviewed by a diamond that routes on its verdict.
const consensusGraph = `digraph Consensus {
  graph [goal="Add a --version flag", label="Consensus", rankdir="LR", default_max_retry=3]

  start [shape=Mdiamond, label="Start"]
  exit  [shape=Msquare, label="Exit"]

  plan_gpt    [label="Plan (GPT)", llm_provider="openai", llm_model="gpt-5", reasoning_effort="high",
               openai_api="responses", timeout="60", prompt="Propose a plan for: $goal"]
  plan_local  [label="Plan (local)", llm_provider="openai", llm_model="llama3.1", prompt="Propose a plan too"]
  plan_opus   [label="Plan (Opus)", llm_provider="anthropic", llm_model="claude-opus-4-5", timeout="60",
               prompt="Propose a plan as well. fake:once_rate_limit"]
  plan_gemini [label="Plan (Gemini)", llm_provider="gemini", llm_model="gemini-2.5-pro", prompt="And one more plan"]
  review      [label="Review", shape=diamond, llm_provider="anthropic", llm_model="claude-sonnet-4-5",
               prompt="Review the plans. fake:answer=OUTCOME:PASS"]

  start -> plan_gpt -> plan_local -> plan_opus -> plan_gemini -> review
  review -> exit     [condition="outcome=success"]
  review -> plan_gpt [condition="outcome=fail"]
}
`

// apiEnv points the three providers at the fake server.
func apiEnv(t *testing.T, s *llmapitest.Server) {
	t.Setenv("OPENAI_BASE_URL", s.OpenAIURL())
	t.Setenv("OPENAI_API_KEY", "sk-test")
	t.Setenv("ANTHROPIC_BASE_URL", s.URL)
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-test")
	t.Setenv("GEMINI_BASE_URL", s.URL)
	t.Setenv("GEMINI_API_KEY", "gm-test")
}

// TestRunOnModelAPIs runs a reference-style graph whose agents use the
// spec's provider keys against a local server speaking each vendor's wire
// format: every node succeeds, usage and cost reach the events and the
// summary, a 429 is retried, the answers stream as agent.text events and
// land in response.md.
func TestRunOnModelAPIs(t *testing.T) {
	s := llmapitest.Start(t)
	s.SetRetryAfter(time.Millisecond)
	apiEnv(t, s)
	dir := t.TempDir()
	file := writeFile(t, dir, "consensus.dot", consensusGraph)
	logs := filepath.Join(dir, "logs")
	code, out, errOut := cli(t, "run", file, "--json", "--logs", logs, "--data", t.TempDir())
	require.Equal(t, 0, code, errOut)
	evs := events(t, out)
	require.Equal(t, []string{"start=success", "plan_gpt=success", "plan_local=success", "plan_opus=success",
		"plan_gemini=success", "review=success", "exit=success"}, completed(evs))

	texts := map[string]string{}
	retried := map[string]bool{}
	for _, e := range evs {
		node, _ := e["node"].(string)
		switch e["kind"] {
		case "agent.text":
			texts[node] += e["message"].(string)
		case "node.retrying":
			retried[node] = true
			require.Contains(t, e["message"], "rate_limit")
		case "node.completed":
			if !strings.HasPrefix(node, "plan_") && node != "review" {
				continue
			}
			u, ok := e["usage"].(map[string]any)
			require.True(t, ok, "node %s reports usage: %v", node, e)
			require.EqualValues(t, llmapitest.InputTokens, u["input_tokens"], node)
			require.EqualValues(t, llmapitest.OutputTokens, u["output_tokens"], node)
			if node == "plan_local" {
				require.EqualValues(t, 0, u["cost"], "a local model has no price")
			} else {
				require.Greater(t, u["cost"], 0.0, "node %s is priced", node)
			}
			if node == "plan_opus" {
				require.EqualValues(t, 2, e["attempts"], "the 429 was retried")
			}
		case "session.completed":
			u := e["usage"].(map[string]any)
			require.EqualValues(t, 5*llmapitest.InputTokens, u["input_tokens"])
		}
	}
	require.Equal(t, map[string]bool{"plan_opus": true}, retried)
	require.Equal(t, "Hello world", texts["plan_gpt"], "the streamed answer")
	require.Equal(t, "OUTCOME:PASS", texts["review"])
	resp, err := os.ReadFile(filepath.Join(logs, "plan_gemini", "response.md"))
	require.NoError(t, err)
	require.Equal(t, "Hello world", string(resp))

	wires := map[string]int{}
	for _, r := range s.Requests() {
		wires[r.Vendor]++
		switch r.Vendor {
		case "openai-responses":
			require.Equal(t, map[string]any{"effort": "high"}, r.Body["reasoning"], "reasoning_effort reaches the API")
		case "openai-chat":
			require.Nil(t, r.Body["reasoning_effort"], "a node without reasoning_effort sends none")
			require.Equal(t, "llama3.1", r.Body["model"])
		}
	}
	require.Equal(t, map[string]int{"openai-responses": 1, "openai-chat": 1, "anthropic": 3, "gemini": 1}, wires,
		"plan_opus twice (the 429, then the answer), review once")
}

// TestOverrideProvidersDryRunsWithTheMock: without keys the graph cannot
// start; --provider mock --override-providers runs it on the mock, and no
// request leaves.
func TestOverrideProvidersDryRunsWithTheMock(t *testing.T) {
	s := llmapitest.Start(t)
	for _, k := range []string{"OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL",
		"GEMINI_API_KEY", "GOOGLE_API_KEY", "GEMINI_BASE_URL", "GOOGLE_GEMINI_BASE_URL"} {
		t.Setenv(k, "")
	}
	dir := t.TempDir()
	file := writeFile(t, dir, "consensus.dot", consensusGraph)

	code, out, errOut := cli(t, "run", file, "--json", "--provider", "mock", "--logs", filepath.Join(dir, "a"), "--data", t.TempDir())
	require.Equal(t, 2, code, "without keys the agents cannot run")
	require.Empty(t, out)
	require.Contains(t, errOut, "provider openai: openai: auth: OPENAI_API_KEY is not set")
	require.Contains(t, errOut, "provider anthropic: anthropic: auth: ANTHROPIC_API_KEY is not set")
	require.Contains(t, errOut, "provider gemini: gemini: auth: GEMINI_API_KEY is not set")

	code, out, errOut = cli(t, "run", file, "--json", "--provider", "mock", "--override-providers",
		"--logs", filepath.Join(dir, "b"), "--data", t.TempDir())
	require.Equal(t, 0, code, errOut)
	require.Equal(t, []string{"start=success", "plan_gpt=success", "plan_local=success", "plan_opus=success",
		"plan_gemini=success", "review=success", "exit=success"}, completed(events(t, out)))
	require.Empty(t, s.Requests())

	code, _, _ = cli(t, "validate", "--providers", "--override-providers", file)
	require.Equal(t, 0, code, "validate checks what run would run")
}

// TestModelAPIUsageCountsAgainstBudgets: the tokens an API reports are
// charged to the graph's budget as they arrive; the run that crosses it
// stops the pipeline with the budget's reason.
func TestModelAPIUsageCountsAgainstBudgets(t *testing.T) {
	s := llmapitest.Start(t)
	apiEnv(t, s)
	dir := t.TempDir()
	file := writeFile(t, dir, "budget.dot", `digraph budget {
  graph [goal="g", budget_tokens=250]
  start [shape=Mdiamond]
  exit  [shape=Msquare]
  one   [llm_provider="anthropic", prompt="first"]
  two   [llm_provider="gemini", prompt="second"]
  three [llm_provider="openai", prompt="third"]
  start -> one -> two -> three -> exit
}
`)
	code, out, errOut := cli(t, "run", file, "--json", "--logs", filepath.Join(dir, "logs"), "--data", t.TempDir())
	require.Equal(t, 1, code, errOut)
	evs := events(t, out)
	require.NotContains(t, completed(evs), "three=success", "nothing runs past the budget")
	var reason string
	for _, e := range evs {
		if e["kind"] == "session.completed" {
			require.Equal(t, "fail", e["status"])
			reason, _ = e["message"].(string)
		}
	}
	require.Contains(t, reason, "budget")
	for _, r := range s.Requests() {
		require.False(t, strings.HasSuffix(r.Prompt, "third"), "the third agent was never called")
	}
}
