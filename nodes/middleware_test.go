package nodes_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/nodes"
)

func TestChainOrder(t *testing.T) {
	var order []string
	mw := func(name string) nodes.Middleware {
		return func(next nodes.Handler) nodes.Handler {
			return nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
				order = append(order, name+">")
				o, err := next.Handle(ctx, in)
				order = append(order, "<"+name)
				return o, err
			})
		}
	}
	h := nodes.Chain(nodes.HandlerFunc(func(context.Context, *nodes.Input) (*nodes.Outcome, error) {
		order = append(order, "handler")
		return &nodes.Outcome{Status: nodes.StatusSuccess}, nil
	}), mw("outer"), mw("inner"))
	_, err := h.Handle(context.Background(), &nodes.Input{})
	require.NoError(t, err)
	require.Equal(t, []string{"outer>", "inner>", "handler", "<inner", "<outer"}, order)
}
