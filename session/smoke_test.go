package session_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/session"
)

// TestSmoke is the spec's integration smoke test (section 11.13) with the
// mock provider: plan → implement (a goal gate) → review → done, with
// failure back-edges.
func TestSmoke(t *testing.T) {
	src := `digraph smoke {
		graph [goal="Create a hello world Python script"]
		start     [shape=Mdiamond]
		plan      [shape=box, prompt="Plan how to create a hello world script for: $goal"]
		implement [shape=box, prompt="Write the code based on the plan", goal_gate=true, retry_target=plan]
		review    [shape=box, prompt="Review the code for correctness"]
		done      [shape=Msquare]
		start -> plan
		plan -> implement
		implement -> review [condition="outcome=success"]
		implement -> plan   [condition="outcome=fail", label="Retry"]
		review -> done      [condition="outcome=success"]
		review -> implement [condition="outcome=fail", label="Fix"]
	}`
	g, diags := graph.Load("smoke.dot", []byte(src))
	require.Empty(t, diags.Errors(), "no lint errors")
	require.Len(t, g.Nodes, 5)
	require.Len(t, g.Edges, 6)

	r := newRun(t)
	rep := r.exec(src)
	require.Equal(t, "success", rep.Status, rep.Reason)
	for _, n := range []string{"plan", "implement", "review"} {
		for _, f := range []string{"prompt.md", "response.md", "status.json"} {
			_, err := os.Stat(filepath.Join(r.logs, n, f))
			require.NoError(t, err, "%s/%s", n, f)
		}
	}
	require.Contains(t, r.file("plan", "prompt.md"), "Create a hello world Python script")
	var cp session.Checkpoint
	require.NoError(t, json.Unmarshal([]byte(r.file("checkpoint.json")), &cp))
	require.Equal(t, "success", cp.NodeOutcomes["implement"], "the goal gate is satisfied")
	require.Equal(t, []string{"start", "plan", "implement", "review", "done"}, cp.CompletedNodes)
	require.Equal(t, "done", cp.CurrentNode)
}
