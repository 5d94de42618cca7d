package graph_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/switchyard/switchyard/graph"
)

// pipelineSrc is a pipeline of n agent nodes with conditions, retries and a
// stylesheet: what Load reads at the start of every run.
func pipelineSrc(n int) []byte {
	var b strings.Builder
	b.WriteString("digraph bench {\n  goal=\"benchmark\"\n  model_stylesheet=\"* { llm_model: m } .hot { reasoning_effort: low }\"\n")
	b.WriteString("  start [shape=Mdiamond]\n  exit [shape=Msquare]\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  n%d [prompt=\"step %d of $goal\", max_retries=2, timeout=30s, class=\"hot\"]\n", i, i)
	}
	b.WriteString("  start -> n0\n")
	for i := 0; i+1 < n; i++ {
		fmt.Fprintf(&b, "  n%d -> n%d [condition=\"outcome=success && context.ok=true\"]\n  n%d -> n%d [condition=\"outcome=fail\", weight=1]\n", i, i+1, i+1, i)
	}
	fmt.Fprintf(&b, "  n%d -> exit\n}\n", n-1)
	return []byte(b.String())
}

func BenchmarkLoad(b *testing.B) {
	for _, n := range []int{10, 100} {
		src := pipelineSrc(n)
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for b.Loop() {
				if _, diags := graph.Load("bench.dot", src); diags.HasErrors() {
					b.Fatal(diags)
				}
			}
		})
	}
}

// undeclaredEdgesSrc is n edges between nodes no statement declares.
func undeclaredEdgesSrc(n int) []byte {
	var b strings.Builder
	b.WriteString("digraph g {\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "n%d -> m%d\n", i, i)
	}
	b.WriteString("}\n")
	return []byte(b.String())
}

// nestedSubgraphsSrc is n subgraphs, each inside the previous one.
func nestedSubgraphsSrc(n int) []byte {
	return []byte("digraph g {\n" + strings.Repeat("subgraph { ", n) + "a" + strings.Repeat(" }", n) + "\n}\n")
}

// BenchmarkParseValidate: parse and validate (Load) grow linearly with the
// graph: a pipeline of 10,000 and 100,000 nodes, and the hostile files of
// 100,000 undeclared edges and 100,000 nested subgraphs (refused).
func BenchmarkParseValidate(b *testing.B) {
	for _, tc := range []struct {
		name   string
		src    []byte
		refuse bool
	}{
		{"pipeline/nodes=10000", pipelineSrc(10_000), false},
		{"pipeline/nodes=100000", pipelineSrc(100_000), false},
		{"undeclared-edges=100000", undeclaredEdgesSrc(100_000), true},
		{"nested-subgraphs=100000", nestedSubgraphsSrc(100_000), true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(tc.src)))
			b.ReportAllocs()
			for b.Loop() {
				if _, diags := graph.Load("bench.dot", tc.src); diags.HasErrors() != tc.refuse {
					b.Fatalf("errors: %v, want %v", diags.HasErrors(), tc.refuse)
				}
			}
		})
	}
}
