package nodes_test

import (
	"context"
	"errors"
	"testing"
	"time"

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

func TestRecover(t *testing.T) {
	tests := []struct {
		name    string
		h       nodes.HandlerFunc
		wantErr string
	}{
		{"panic with a value", func(context.Context, *nodes.Input) (*nodes.Outcome, error) { panic("kaboom") }, "kaboom"},
		{"panic with an error", func(context.Context, *nodes.Input) (*nodes.Outcome, error) { panic(errors.New("broken")) }, "broken"},
		{"nil map write", func(context.Context, *nodes.Input) (*nodes.Outcome, error) {
			var m map[string]string
			m["x"] = "y"
			return nil, nil
		}, "nil map"},
		{"no panic", func(context.Context, *nodes.Input) (*nodes.Outcome, error) { return &nodes.Outcome{}, nil }, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, err := nodes.Chain(tc.h, nodes.Recover()).Handle(context.Background(), &nodes.Input{})
			if tc.wantErr == "" {
				require.NoError(t, err)
				require.NotNil(t, o)
				return
			}
			require.Nil(t, o)
			require.ErrorContains(t, err, tc.wantErr)
			require.ErrorContains(t, err, "goroutine", "the stack is in the reason")
		})
	}
}

func TestTimeoutMiddleware(t *testing.T) {
	slow := nodes.HandlerFunc(func(ctx context.Context, _ *nodes.Input) (*nodes.Outcome, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	start := time.Now()
	_, err := nodes.Chain(slow, nodes.Timeout(time.Millisecond)).Handle(context.Background(), &nodes.Input{})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 5*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	_, err = nodes.Chain(slow, nodes.Timeout(time.Hour)).Handle(ctx, &nodes.Input{})
	require.ErrorIs(t, err, context.DeadlineExceeded, "an earlier deadline of the caller holds")

	o, err := nodes.Chain(noop, nodes.Timeout(time.Hour)).Handle(context.Background(), &nodes.Input{})
	require.NoError(t, err)
	require.Equal(t, nodes.StatusSuccess, o.Status)
}
