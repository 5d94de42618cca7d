package graph_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph"
)

func TestLimitsDefaultBySessionKind(t *testing.T) {
	load := func(src string) *graph.Graph { return load(t, src) }
	// A pipeline keeps its loop caps.
	p := load(`digraph p { start [shape=Mdiamond]; a [prompt=x]; exit [shape=Msquare]; start -> a -> exit }`)
	require.Equal(t, graph.Limit{N: graph.DefaultMaxIterations}, p.IterationLimit())
	require.Equal(t, graph.Limit{N: graph.DefaultMaxVisits}, p.Node("a").VisitLimit(p))

	// A session has none unless it sets them.
	s := load(`digraph s { kind=session; a [prompt=x]; b [prompt=y, max_visits=0]; c [prompt=z, max_iterations="100/1h"]; a -> b }`)
	require.True(t, s.IterationLimit().Unlimited())
	require.True(t, s.Node("a").VisitLimit(s).Unlimited())
	require.True(t, s.Node("b").VisitLimit(s).Unlimited())
	require.Equal(t, graph.Limit{N: 100, Window: time.Hour}, s.Node("c").VisitLimit(s))
	require.Equal(t, "100/1h", s.Node("c").VisitLimit(s).String())

	// 0 means unlimited in a pipeline too.
	z := load(`digraph z { max_iterations=0; max_visits=0; start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }`)
	require.True(t, z.IterationLimit().Unlimited())
	require.True(t, z.Node("start").VisitLimit(z).Unlimited())
}
