package graph_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph"
)

// TestLimits: hostile files are refused early, with an error that names
// the limit and says where; files within the limits load.
func TestLimits(t *testing.T) {
	t.Run("100,000 nested subgraphs", func(t *testing.T) {
		g, diags := graph.Load("deep.dot", nestedSubgraphsSrc(100_000))
		require.Nil(t, g)
		require.Len(t, diags, 1)
		d := diags[0]
		require.Equal(t, "max_subgraph_depth", d.Rule)
		require.Contains(t, d.Message, "MaxSubgraphDepth")
		require.Equal(t, 2, d.Pos.Line)
		require.Equal(t, 1+len("subgraph { ")*graph.MaxSubgraphDepth, d.Pos.Col, "at the subgraph one too deep")
	})
	t.Run("nesting at the limit", func(t *testing.T) {
		g, diags := graph.Load("deep.dot", nestedSubgraphsSrc(graph.MaxSubgraphDepth), graph.AsSession())
		require.False(t, diags.HasErrors(), "%v", diags)
		require.Len(t, g.Subgraphs, graph.MaxSubgraphDepth)
		require.Equal(t, []string{"a"}, g.Subgraphs[0].Nodes)
	})
	t.Run("100,000 undeclared edges", func(t *testing.T) {
		g, diags := graph.Load("edges.dot", undeclaredEdgesSrc(100_000))
		require.NotNil(t, g)
		require.True(t, diags.HasErrors())
		var targets []graph.Diagnostic
		for _, d := range diags {
			if d.Rule == "edge_target_exists" {
				targets = append(targets, d)
			}
		}
		require.Len(t, targets, 101, "the first 100 and a count of the rest")
		require.Equal(t, `node "n0" is used by an edge but never declared`, targets[0].Message)
		require.Equal(t, 2, targets[0].Pos.Line)
		last := targets[100]
		require.Equal(t, "199900 more edge_target_exists diagnostics not shown (at most 100 per rule)", last.Message)
		require.Equal(t, 52, last.Pos.Line, "where the first one not shown is")
		for _, d := range diags {
			require.NotEqual(t, "prompt_on_llm_nodes", d.Rule, "undeclared nodes get no other diagnostic")
		}
	})
	t.Run("file size", func(t *testing.T) {
		src := []byte("digraph big {\n" + strings.Repeat(" ", graph.MaxFileSize) + "}\n")
		g, diags := graph.Load("big.dot", src)
		require.Nil(t, g)
		require.Len(t, diags, 1)
		require.Equal(t, "max_file_size", diags[0].Rule)
		require.Contains(t, diags[0].Message, "MaxFileSize")
		require.Equal(t, 1, diags[0].Pos.Line)
	})
	t.Run("nodes", func(t *testing.T) {
		defer graph.SetLimitsForTest(1000, graph.MaxEdges)()
		var b strings.Builder
		b.WriteString("digraph many {\n")
		for i := 0; i <= 1000; i++ {
			fmt.Fprintf(&b, "n%d\n", i)
		}
		b.WriteString("}\n")
		g, diags := graph.Load("many.dot", []byte(b.String()))
		require.Nil(t, g)
		require.Len(t, diags, 1)
		require.Equal(t, "max_nodes", diags[0].Rule)
		require.Equal(t, "the graph has more than 1000 nodes (MaxNodes)", diags[0].Message)
		require.Equal(t, 1000+2, diags[0].Pos.Line, "at the first node too many")
	})
	t.Run("edges", func(t *testing.T) {
		defer graph.SetLimitsForTest(graph.MaxNodes, 1000)()
		// One chain a -> a -> ... is 1001 edges on one line.
		src := "digraph loop {\na\n" + strings.Repeat("a -> ", 1001) + "a\n}\n"
		g, diags := graph.Load("loop.dot", []byte(src))
		require.Nil(t, g)
		require.Len(t, diags, 1)
		require.Equal(t, "max_edges", diags[0].Rule)
		require.Equal(t, "the graph has more than 1000 edges (MaxEdges)", diags[0].Message)
		require.Equal(t, 3, diags[0].Pos.Line)
		require.Equal(t, 1+len("a -> ")*1000, diags[0].Pos.Col)
	})
}
