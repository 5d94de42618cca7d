package graph_test

import (
	"flag"
	"fmt"
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

// summary renders a loaded graph compactly: its attributes, each node with
// its resolved handler type, classes and attributes, each edge.
func summary(g *graph.Graph) string {
	var b strings.Builder
	fmt.Fprintf(&b, "graph %s %s\n", g.Name, attrs(g.Attrs))
	for _, n := range g.Nodes {
		fmt.Fprintf(&b, "node %s type=%s classes=%v %s\n", n.ID, g.HandlerType(n), n.Classes, attrs(n.Attrs))
	}
	for _, e := range g.Edges {
		fmt.Fprintf(&b, "edge %s -> %s #%d %s\n", e.From, e.To, e.Index, attrs(e.Attrs))
	}
	return b.String()
}

func attrs(a graph.Attrs) string {
	var parts []string
	for _, k := range a.Keys() {
		parts = append(parts, fmt.Sprintf("%s=%q(%s)", k, a[k].Text, a[k].Kind))
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// condMessage is the tail of a condition_syntax message: the wording of
// edges/cond's error, which that package owns. The golden files keep the
// position, the rule and the condition, and not that wording.
var condMessage = regexp.MustCompile(`(condition_syntax: .*"): [^\n]*`)

func normalizeCondMessages(s string) string { return condMessage.ReplaceAllString(s, "$1: …") }

// TestGolden loads every testdata/*.dottest (DOT, a ---------- line, the
// expected diagnostics and model summary) and compares.
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
