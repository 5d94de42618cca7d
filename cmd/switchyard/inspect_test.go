package main

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/inspect")

// TestInspectGolden: `inspect --json` prints the graph run would run, in
// the documented schema; testdata/inspect/NAME.json is the expected output
// for NAME.dot (go test -run TestInspectGolden -update rewrites them).
func TestInspectGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/inspect/*.dot")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			code, out, errOut := cli(t, "inspect", "--json", file)
			require.Equal(t, 0, code, errOut)
			golden := strings.TrimSuffix(file, ".dot") + ".json"
			if *update {
				require.NoError(t, os.WriteFile(golden, []byte(out), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err)
			require.Equal(t, string(want), out)
		})
	}
}

// TestInspectResolves checks, field by field, what the golden file holds:
// node defaults, the stylesheet, subgraph classes, $goal, resolved types,
// edges with their label, condition and weight.
func TestInspectResolves(t *testing.T) {
	code, out, errOut := cli(t, "inspect", "--json", "testdata/inspect/review.dot")
	require.Equal(t, 0, code, errOut)
	var g inspectGraph
	require.NoError(t, json.Unmarshal([]byte(out), &g))
	require.Equal(t, InspectSchema, g.Schema)
	require.Equal(t, "review", g.Name)
	require.Equal(t, "pipeline", g.Kind)
	require.Equal(t, "Ship the release notes", g.Attrs["goal"])
	nodes := map[string]inspectNode{}
	for _, n := range g.Nodes {
		nodes[n.ID] = n
	}
	require.Equal(t, "Draft notes for: Ship the release notes", nodes["draft"].Attrs["prompt"], "$goal is expanded")
	require.Equal(t, "5m", nodes["draft"].Attrs["timeout"], "the node default applies")
	require.Equal(t, "30s", nodes["publish"].Attrs["timeout"], "a node's own attribute wins")
	require.Equal(t, "claude-sonnet-4-5", nodes["draft"].Attrs["llm_model"], "the stylesheet's * rule")
	require.Equal(t, []string{"critical"}, nodes["check"].Classes, "the subgraph's label is a class")
	require.Equal(t, "gpt-5", nodes["check"].Attrs["llm_model"], "the .critical rule beats *")
	require.Equal(t, "low", nodes["check"].Attrs["reasoning_effort"], "the #check rule")
	for id, typ := range map[string]string{"start": "start", "exit": "exit", "draft": "codergen", "check": "conditional",
		"approve": "wait.human", "publish": "tool"} {
		require.Equal(t, typ, nodes[id].Type, id)
	}
	require.Equal(t, "Approve the notes?", nodes["approve"].Label)
	require.Equal(t, "box", nodes["draft"].Shape, "the default shape")
	var pass *inspectEdge
	for i, e := range g.Edges {
		if e.From == "check" && e.To == "approve" {
			pass = &g.Edges[i]
		}
	}
	require.NotNil(t, pass)
	require.Equal(t, "pass", pass.Label)
	require.Equal(t, "outcome=success", pass.Condition)
	require.Equal(t, 2, pass.Weight)
	require.Len(t, g.Edges, 7)
	require.Empty(t, g.Diagnostics)
}

func TestInspectErrors(t *testing.T) {
	dir := t.TempDir()
	bad := writeFile(t, dir, "bad.dot", "digraph g { start [shape=Mdiamond]; a [prompt=\"x\"]; start -> a }\n")
	code, out, _ := cli(t, "inspect", "--json", bad)
	require.Equal(t, 1, code, "a graph with errors")
	var g struct {
		Nodes       []map[string]any
		Diagnostics []map[string]any
	}
	require.NoError(t, json.Unmarshal([]byte(out), &g), "the graph is still printed")
	require.Len(t, g.Nodes, 2)
	require.NotEmpty(t, g.Diagnostics)
	require.Equal(t, bad, g.Diagnostics[0]["file"])
	require.Equal(t, "error", g.Diagnostics[0]["severity"], "diagnostics as validate --json prints them")

	code, _, errOut := cli(t, "inspect", "--json", writeFile(t, dir, "broken.dot", "digraph {"))
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "broken.dot:")

	code, _, _ = cli(t, "inspect")
	require.Equal(t, 2, code)
}

func TestHandlersJSON(t *testing.T) {
	code, out, errOut := cli(t, "handlers", "--json")
	require.Equal(t, 0, code, errOut)
	var list []handlerInfo
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	byType := map[string]handlerInfo{}
	for _, h := range list {
		require.NotEmpty(t, h.Doc, h.Type)
		byType[h.Type] = h
	}
	for _, typ := range []string{"start", "exit", "codergen", "conditional", "wait.human", "tool", "parallel", "parallel.fan_in", "stack.manager_loop"} {
		require.Contains(t, byType, typ)
	}
	require.Equal(t, []string{"hexagon"}, byType["wait.human"].Shapes)
	require.Equal(t, []string{"invhouse", "tripleoctagon"}, byType["parallel.fan_in"].Shapes)

	code, out, _ = cli(t, "handlers")
	require.Equal(t, 0, code)
	require.Contains(t, out, "wait.human")
}
