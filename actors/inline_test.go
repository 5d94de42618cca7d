package actors

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/nodes"
)

func TestInlinedOnlyWhatNeverBlocks(t *testing.T) {
	reg := nodes.NewRegistry()
	require.NoError(t, nodes.RegisterBuiltins(reg, nodes.Deps{}))
	get := func(typ string) nodes.Handler {
		h, ok := reg.Lookup(typ)
		require.True(t, ok, typ)
		return h
	}
	node := func(attrs graph.KV) *graph.Node {
		n := &graph.Node{ID: "n", Attrs: graph.Attrs{}}
		for k, v := range attrs {
			n.Attrs.Set(k, v)
		}
		return n
	}
	plain := node(nil)
	noop := func(context.Context, *nodes.Input) (*nodes.Outcome, error) { return &nodes.Outcome{}, nil }
	wrap := func(next nodes.Handler) nodes.Handler { return nodes.HandlerFunc(next.Handle) }
	for _, tc := range []struct {
		name string
		h    nodes.Handler
		n    *graph.Node
		want bool
	}{
		{"start", get("start"), plain, true},
		{"exit", get("exit"), plain, true},
		{"parallel", get("parallel"), plain, true},
		{"a routing diamond", get("conditional"), plain, true},
		{"a diamond with an agent", get("conditional"), node(graph.KV{"prompt": "judge it"}), false},
		{"an agent", get("codergen"), plain, false},
		{"a tool", get("tool"), plain, false},
		{"a human gate", get("wait.human"), plain, false},
		{"a handler that may block", nodes.HandlerFunc(noop), plain, false},
		{"one that never does", nodes.InlineFunc(noop), plain, true},
		{"behind middleware", nodes.Chain(nodes.InlineFunc(noop), wrap), plain, false},
	} {
		require.Equal(t, tc.want, inlined(tc.h, tc.n), tc.name)
	}
}
