package graph_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph"
)

// TestTerminalsFoundByID: graphs written for other implementations name
// their start and exit by id and give them some other shape; without a
// node of the start (exit) shape, the id decides (spec 3.2, 7.2).
func TestTerminalsFoundByID(t *testing.T) {
	for _, tc := range []struct{ name, src, start, exit string }{
		{"circle shapes", `digraph a { start [shape=circle]; work [prompt="w"]; end [shape=doublecircle]; start -> work -> end }`, "start", "end"},
		{"boxes", `digraph b { Start [shape=box]; work [prompt="w"]; exit [shape=box]; Start -> work -> exit }`, "Start", "exit"},
		{"only the start by shape", `digraph c { begin [shape=Mdiamond]; work [prompt="w"]; Exit [shape=box]; begin -> work -> Exit }`, "begin", "Exit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, diags := graph.Load("t.dot", []byte(tc.src))
			require.False(t, diags.HasErrors(), "%v", diags)
			require.Equal(t, tc.start, g.StartNode().ID)
			require.Equal(t, tc.exit, g.ExitNode().ID)
			require.Equal(t, graph.TypeStart, g.HandlerType(g.Node(tc.start)))
			require.Equal(t, graph.TypeExit, g.HandlerType(g.Node(tc.exit)))
			require.Equal(t, graph.TypeCodergen, g.HandlerType(g.Node("work")))
		})
	}
	t.Run("a shaped start wins over the id", func(t *testing.T) {
		g, diags := graph.Load("t.dot", []byte(`digraph d { begin [shape=Mdiamond]; start [shape=box, prompt="s"]; exit [shape=Msquare]; begin -> start -> exit }`))
		require.False(t, diags.HasErrors(), "%v", diags)
		require.Equal(t, graph.TypeCodergen, g.HandlerType(g.Node("start")), "an agent node called start stays one")
	})
	t.Run("not in sessions", func(t *testing.T) {
		g, diags := graph.Load("t.dot", []byte(`digraph s { kind="session"; end [shape=box, prompt="summarise"] }`))
		require.False(t, diags.HasErrors(), "%v", diags)
		require.Equal(t, graph.TypeCodergen, g.HandlerType(g.Node("end")))
	})
}

// TestForeignAttributeWarned: kilroy's llm_prompt is not Switchyard's: a
// warning says it is ignored and names prompt.
func TestForeignAttributeWarned(t *testing.T) {
	_, diags := graph.Load("t.dot", []byte(`digraph k { start [shape=Mdiamond]
	work [llm_prompt="write the code"]
	exit [shape=Msquare]; start -> work -> exit }`))
	var found bool
	for _, d := range diags.Warnings() {
		if d.Rule == "attr_unknown" && d.NodeID == "work" {
			found = true
			require.Contains(t, d.Message, `"llm_prompt"`)
			require.Contains(t, d.Message, `use "prompt"`)
			require.Equal(t, 2, d.Pos.Line)
		}
	}
	require.True(t, found, "no warning about llm_prompt: %v", diags)
}
