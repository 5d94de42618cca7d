package graph_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph"
)

var update = flag.Bool("update", false, "rewrite the expected output of testdata/*.dottest")

const sep = "----------\n"

// modelSummary is the JSON summary of a loaded graph that golden files
// hold: attributes as "kind:text", each node with its resolved handler
// type and classes, each edge with its index.
type modelSummary struct {
	Name      string            `json:"name"`
	Attrs     map[string]string `json:"attrs,omitempty"`
	Nodes     []nodeSummary     `json:"nodes"`
	Edges     []edgeSummary     `json:"edges,omitempty"`
	Subgraphs []subgraphSummary `json:"subgraphs,omitempty"`
}

type nodeSummary struct {
	ID      string            `json:"id"`
	Type    string            `json:"type"`
	Classes []string          `json:"classes,omitempty"`
	Attrs   map[string]string `json:"attrs,omitempty"`
}

type edgeSummary struct {
	From  string            `json:"from"`
	To    string            `json:"to"`
	Index int               `json:"index,omitempty"`
	Attrs map[string]string `json:"attrs,omitempty"`
}

type subgraphSummary struct {
	ID    string            `json:"id"`
	Nodes []string          `json:"nodes"`
	Attrs map[string]string `json:"attrs,omitempty"`
}

func summary(g *graph.Graph) string {
	m := modelSummary{Name: g.Name, Attrs: attrs(g.Attrs), Nodes: []nodeSummary{}}
	for _, n := range g.Nodes {
		m.Nodes = append(m.Nodes, nodeSummary{ID: n.ID, Type: g.HandlerType(n), Classes: n.Classes, Attrs: attrs(n.Attrs)})
	}
	for _, e := range g.Edges {
		m.Edges = append(m.Edges, edgeSummary{From: e.From, To: e.To, Index: e.Index, Attrs: attrs(e.Attrs)})
	}
	for _, sg := range g.Subgraphs {
		m.Subgraphs = append(m.Subgraphs, subgraphSummary{ID: sg.ID, Nodes: sg.Nodes, Attrs: attrs(sg.Attrs)})
	}
	out, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		panic(err)
	}
	return string(out) + "\n"
}

func attrs(a graph.Attrs) map[string]string {
	if len(a) == 0 {
		return nil
	}
	m := make(map[string]string, len(a))
	for k, v := range a {
		m[k] = v.Kind.String() + ":" + v.Text
	}
	return m
}

// condMessage is the tail of a condition_syntax message: the wording of
// edges/cond's error, which that package owns. The golden files keep the
// position, the rule and the condition, and not that wording.
var condMessage = regexp.MustCompile(`(condition_syntax: .*"): [^\n]*`)

func normalizeCondMessages(s string) string { return condMessage.ReplaceAllString(s, "$1: …") }

// TestGolden loads every testdata/*.dottest (DOT, a ---------- line, the
// expected diagnostics, then the JSON summary of the model when it has no
// error) and compares. go test -update rewrites the expectations.
func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/*.dottest")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			src, want, ok := strings.Cut(string(data), sep)
			require.True(t, ok, "%s has no %q line", f, strings.TrimSpace(sep))
			g, diags := graph.Load("test.dot", []byte(src))
			got := normalizeCondMessages(diags.String())
			if g != nil && !diags.HasErrors() {
				got += summary(g)
			}
			if *update {
				require.NoError(t, os.WriteFile(f, []byte(src+sep+got), 0o644))
				return
			}
			require.Equal(t, want, got)
		})
	}
}
