package nodes_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/nodes"
)

var noop = nodes.HandlerFunc(func(context.Context, *nodes.Input) (*nodes.Outcome, error) {
	return &nodes.Outcome{Status: nodes.StatusSuccess}, nil
})

func TestBuiltinTypes(t *testing.T) {
	r := registry(t, nodes.Deps{})
	require.Equal(t, []string{"codergen", "conditional", "exit", "parallel", "parallel.fan_in", "stack.manager_loop", "start", "tool", "wait.human"}, r.Types())
	require.ErrorIs(t, nodes.RegisterBuiltins(r, nodes.Deps{}), nodes.ErrDuplicate, "built-ins are registered once")
}

func TestValidType(t *testing.T) {
	tests := []struct {
		typ  string
		want bool
	}{
		{"codergen", true}, {"wait.human", true}, {"my.custom_2", true}, {"_x", true}, {"A.b.C", true},
		{"", false}, {".x", false}, {"x.", false}, {"a..b", false}, {"1x", false}, {"a.1b", false},
		{"a b", false}, {"a-b", false}, {"é", false},
	}
	for _, tc := range tests {
		t.Run(tc.typ, func(t *testing.T) {
			require.Equal(t, tc.want, nodes.ValidType(tc.typ))
			err := nodes.NewRegistry().Register(nodes.Info{Type: tc.typ, Handler: noop})
			if tc.want {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, nodes.ErrInvalidType)
			}
		})
	}
}

func TestRegisterAndReplace(t *testing.T) {
	r := registry(t, nodes.Deps{})
	require.ErrorIs(t, r.Register(nodes.Info{Type: "codergen", Handler: noop}), nodes.ErrDuplicate, "replacing is deliberate")
	require.NoError(t, r.Replace(nodes.Info{Type: "codergen", Handler: noop, Doc: "mine"}))
	h, ok := r.Lookup("codergen")
	require.True(t, ok)
	o, err := h.Handle(context.Background(), &nodes.Input{})
	require.NoError(t, err)
	require.Equal(t, nodes.StatusSuccess, o.Status)

	require.Error(t, r.Register(nodes.Info{Type: "no.handler"}))
	_, ok = r.Lookup("missing")
	require.False(t, ok)
	require.NoError(t, r.Replace(nodes.Info{Type: "brand.new", Handler: noop}), "Replace also adds")
	require.Contains(t, r.Types(), "brand.new")

	built := 0
	require.NoError(t, r.Register(nodes.Info{Type: "made.by_new", Doc: "built once", New: func() nodes.Handler { built++; return noop }}))
	require.Equal(t, 1, built)
	info, ok := r.Info("made.by_new")
	require.True(t, ok)
	require.Equal(t, "built once", info.Doc)
	require.NotNil(t, info.Handler)
	info, ok = r.Info("codergen")
	require.True(t, ok)
	require.Equal(t, "mine", info.Doc)
	_, ok = r.Info("missing")
	require.False(t, ok)
	require.Error(t, r.Register(nodes.Info{Type: "nil.new", New: func() nodes.Handler { return nil }}))
}

func TestBuiltinDocs(t *testing.T) {
	r := registry(t, nodes.Deps{})
	for _, typ := range r.Types() {
		info, ok := r.Info(typ)
		require.True(t, ok)
		require.NotEmpty(t, info.Doc, typ)
	}
}

func TestStartAndExit(t *testing.T) {
	g := load(t, `digraph s { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }`)
	r := registry(t, nodes.Deps{})
	for _, id := range []string{"start", "exit"} {
		t.Run(id, func(t *testing.T) {
			o := handle(t, r, input(t, g, id))
			require.Equal(t, nodes.StatusSuccess, o.Status)
			require.Empty(t, o.ContextUpdates)
		})
	}
}

// validated is a handler whose Validate returns err.
type validated struct {
	nodes.HandlerFunc
	err error
}

func (v validated) Validate() error { return v.err }

// closing is a handler that holds a resource.
type closing struct {
	nodes.HandlerFunc
	closed *int
	err    error
}

func (c closing) Close() error { *c.closed++; return c.err }

func TestValidateAndClose(t *testing.T) {
	r := nodes.NewRegistry()
	require.ErrorContains(t, r.Register(nodes.Info{Type: "bad", Handler: validated{noop, errors.New("needs a key")}}), "needs a key")
	_, ok := r.Lookup("bad")
	require.False(t, ok, "a handler that fails Validate is not registered")
	require.NoError(t, r.Register(nodes.Info{Type: "good", Handler: validated{noop, nil}}))

	closed := 0
	require.NoError(t, r.Register(nodes.Info{Type: "c1", Handler: closing{noop, &closed, nil}}))
	require.NoError(t, r.Register(nodes.Info{Type: "c2", Handler: closing{noop, &closed, errors.New("c2 stuck")}}))
	require.ErrorContains(t, r.Close(), "c2 stuck")
	require.Equal(t, 2, closed)
}

func TestRegistryConcurrentUse(t *testing.T) {
	r := registry(t, nodes.Deps{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 100; i++ {
			_ = r.Replace(nodes.Info{Type: "x.y", Handler: noop})
		}
	}()
	for i := 0; i < 100; i++ {
		_, _ = r.Lookup("x.y")
		_ = r.Types()
	}
	<-done
	_, ok := r.Lookup("x.y")
	require.True(t, ok)
}
