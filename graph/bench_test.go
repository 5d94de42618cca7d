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
