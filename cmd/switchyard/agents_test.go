package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// buildFake builds one of the fake agent CLIs of the agent tests
// (nodes/agent/testdata/fakeNAME) and returns its path.
func buildFake(t *testing.T, name string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "fake"+name)
	cmd := exec.Command("go", "build", "-o", out, "../../nodes/agent/testdata/fake"+name)
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "build fake%s: %s", name, b)
	return out
}

// writeFile writes content to dir/name and returns the path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

const claudeGraph = `digraph c {
  start [shape=Mdiamond]
  exit [shape=Msquare]
  work [llm_provider="claude", prompt="Say hello"]
  start -> work -> exit
}
`

// TestRunMissingAgentExecutable: a node's CLI that cannot be found is
// reported before anything runs (exit 2, no events, no run directory).
func TestRunMissingAgentExecutable(t *testing.T) {
	t.Setenv("SWITCHYARD_CLAUDE_BIN", "/nonexistent/claude")
	dir := t.TempDir()
	file := writeFile(t, dir, "c.dot", claudeGraph)
	logs := filepath.Join(dir, "logs")
	code, out, errOut := cli(t, "run", file, "--json", "--logs", logs, "--data", t.TempDir())
	require.Equal(t, 2, code, errOut)
	require.Empty(t, out, "nothing ran")
	require.Contains(t, errOut, `provider claude: claude: executable "/nonexistent/claude" not found`)
	require.Contains(t, errOut, "SWITCHYARD_CLAUDE_BIN")
	_, err := os.Stat(logs)
	require.True(t, os.IsNotExist(err), "no run directory")
}

func TestValidateProviders(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "c.dot", claudeGraph)
	roled := writeFile(t, dir, "r.dot", `digraph r {
  start [shape=Mdiamond]
  exit [shape=Msquare]
  review [llm_provider="claude", role="security", prompt="Review"]
  start -> review -> exit
}
`)
	roles := filepath.Join(dir, "roles")
	writeFile(t, roles, "security.md", "---\ncapabilities: read\n---\nYou review for security.\n")

	t.Setenv("SWITCHYARD_CLAUDE_BIN", "/nonexistent/claude")
	code, out, _ := cli(t, "validate", file)
	require.Equal(t, 0, code, "without --providers the CLIs are not checked")
	require.Empty(t, out)

	code, out, _ = cli(t, "validate", "--providers", file)
	require.Equal(t, 1, code)
	require.Contains(t, out, file+":4:3: error: provider_ready: provider claude: claude: executable \"/nonexistent/claude\" not found")

	code, out, _ = cli(t, "validate", "--providers", "--json", file)
	require.Equal(t, 1, code)
	var diags []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &diags))
	require.Len(t, diags, 1)
	require.Equal(t, "provider_ready", diags[0]["rule"])
	require.Equal(t, "work", diags[0]["node"])

	t.Setenv("SWITCHYARD_CLAUDE_BIN", os.Args[0]) // any executable
	code, out, _ = cli(t, "validate", "--providers", file)
	require.Equal(t, 0, code, out)

	code, out, _ = cli(t, "validate", "--providers", roled)
	require.Equal(t, 1, code)
	require.Contains(t, out, `node review: unknown role "security"`)
	code, out, _ = cli(t, "validate", "--providers", "--roles", roles, roled)
	require.Equal(t, 0, code, out)

	// Every agent node with no provider takes --provider.
	code, out, _ = cli(t, "validate", "--providers", "--provider", "nosuch", "../../examples/hello.dot")
	require.Equal(t, 1, code)
	require.Contains(t, out, `unknown provider "nosuch"`)
}

func TestProviderFilesUsageErrors(t *testing.T) {
	dir := t.TempDir()
	badRoles := filepath.Join(dir, "roles")
	writeFile(t, badRoles, "broken.md", "---\nno_such_key: 1\n---\nText\n")
	badPrices := writeFile(t, dir, "prices.json", `{"m": {"input": -1}}`)
	for _, args := range [][]string{
		{"run", "../../examples/hello.dot", "--roles", badRoles},
		{"run", "../../examples/hello.dot", "--roles", filepath.Join(dir, "missing")},
		{"run", "../../examples/hello.dot", "--prices", badPrices},
		{"resume", "s1", "--roles", badRoles},
		{"validate", "--providers", "--roles", badRoles, "../../examples/hello.dot"},
	} {
		code, out, errOut := cli(t, append(args, "--data", t.TempDir())...)
		if args[0] == "validate" {
			code, out, errOut = cli(t, args...)
		}
		require.Equal(t, 2, code, "%v: %s", args, errOut)
		require.Empty(t, out, "%v: nothing ran", args)
		require.Contains(t, errOut, "switchyard: ", args)
	}
}

// TestRunWithFakeClaude runs a one-node pipeline through the claude
// provider and a fake Claude Code: the node completes with the CLI's usage
// and cost, in the node's event, the session's and the summary.
func TestRunWithFakeClaude(t *testing.T) {
	t.Setenv("SWITCHYARD_CLAUDE_BIN", buildFake(t, "claude"))
	dir := t.TempDir()
	args := filepath.Join(dir, "args.json")
	t.Setenv("FAKE_ARGS_FILE", args)
	roles := filepath.Join(dir, "roles")
	writeFile(t, roles, "greeter.md", "---\ncapabilities: read\nmax_turns: 4\n---\nYou greet people.\n")
	file := writeFile(t, dir, "c.dot", `digraph c {
  goal="Greet"
  start [shape=Mdiamond]
  exit [shape=Msquare]
  work [llm_provider="claude", role="greeter", prompt="Say hello"]
  start -> work -> exit
}
`)
	logs := filepath.Join(dir, "logs")
	code, out, errOut := cli(t, "run", file, "--json", "--logs", logs, "--data", t.TempDir(), "--roles", roles)
	require.Equal(t, 0, code, errOut)
	evs := events(t, out)
	require.Equal(t, []string{"start=success", "work=success", "exit=success"}, completed(evs))
	wantUsage := map[string]any{"input_tokens": 150.0, "output_tokens": 50.0, "cost": 0.0123}
	var node map[string]any
	for _, e := range evs {
		if e["kind"] == "node.completed" && e["node"] == "work" {
			node = e
		}
	}
	require.NotNil(t, node)
	require.Equal(t, wantUsage, node["usage"], "the CLI's tokens (fresh + cache) and its own cost")
	last := evs[len(evs)-1]
	require.Equal(t, "session.completed", last["kind"])
	require.Equal(t, "success", last["status"])
	require.Equal(t, wantUsage, last["usage"], "the session's total")

	resp, err := os.ReadFile(filepath.Join(logs, "work", "response.md"))
	require.NoError(t, err)
	require.Equal(t, "Hello\n\nworld", string(resp))
	var inv struct {
		Args  []string `json:"args"`
		Stdin string   `json:"stdin"`
	}
	b, err := os.ReadFile(args)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &inv))
	require.Contains(t, inv.Stdin, "Say hello")
	require.Contains(t, inv.Args, "You greet people.", "the role from --roles is the system prompt")
	require.Contains(t, inv.Args, "--max-turns")

	// The human view: the summary shows the usage per node and in total.
	code, _, errOut = cli(t, "run", file, "--logs", filepath.Join(dir, "logs2"), "--data", t.TempDir(), "--roles", roles)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `work\s+success\s+1\s+1\s+\S+\s+150 in / 50 out tokens, \$0\.0123`, errOut)
	require.Contains(t, errOut, ": success; 150 in / 50 out tokens, $0.0123")
}

// TestRunPricesFile: a CLI that reports tokens only (codex) is priced from
// the table --prices adds to the built-in one.
func TestRunPricesFile(t *testing.T) {
	t.Setenv("SWITCHYARD_CODEX_BIN", buildFake(t, "codex"))
	dir := t.TempDir()
	prices := writeFile(t, dir, "prices.json", `{"house-model": {"input": 2, "cached_input": 1, "output": 10}}`)
	file := writeFile(t, dir, "c.dot", `digraph c {
  start [shape=Mdiamond]
  exit [shape=Msquare]
  work [llm_provider="codex", llm_model="house-model", prompt="Say hello"]
  start -> work -> exit
}
`)
	code, out, errOut := cli(t, "run", file, "--json", "--logs", filepath.Join(dir, "logs"), "--data", t.TempDir(), "--prices", prices)
	require.Equal(t, 0, code, errOut)
	evs := events(t, out)
	last := evs[len(evs)-1]
	// 800 fresh input tokens at $2, 200 cached at $1, 300 output at $10 per million.
	require.Equal(t, map[string]any{"input_tokens": 1000.0, "output_tokens": 300.0, "cost": 0.0048}, last["usage"])
}

// TestRunThreadResumesClaudeSession: on the real runtime, the second node
// of a thread with fidelity="full" resumes the Claude Code session the
// first one started (claude --resume ID), with its own prompt only.
func TestRunThreadResumesClaudeSession(t *testing.T) {
	t.Setenv("SWITCHYARD_CLAUDE_BIN", buildFake(t, "claude"))
	dir := t.TempDir()
	file := writeFile(t, dir, "t.dot", `digraph t {
  goal="Greet"
  start [shape=Mdiamond]
  exit [shape=Msquare]
  first [llm_provider="claude", thread_id="t1", prompt="Say hello"]
  second [llm_provider="claude", thread_id="t1", fidelity="full", prompt="Go on"]
  start -> first -> second -> exit
}
`)
	logs := filepath.Join(dir, "logs")
	code, out, errOut := cli(t, "run", file, "--json", "--logs", logs, "--data", t.TempDir())
	require.Equal(t, 0, code, errOut)
	require.Equal(t, []string{"start=success", "first=success", "second=success", "exit=success"}, completed(events(t, out)))
	first, err := os.ReadFile(filepath.Join(logs, "first", "response.md"))
	require.NoError(t, err)
	require.Equal(t, "Hello\n\nworld", string(first))
	second, err := os.ReadFile(filepath.Join(logs, "second", "response.md"))
	require.NoError(t, err)
	require.Equal(t, "Hello\n\nworld (resumed c0ffee00-0000-4000-8000-000000000001)", string(second))
	prompt, err := os.ReadFile(filepath.Join(logs, "second", "prompt.md"))
	require.NoError(t, err)
	require.Equal(t, "Go on", string(prompt))
}
