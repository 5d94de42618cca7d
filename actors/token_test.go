package actors

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// TestDeltaOf: an envelope's delta lists the keys changed, sorted, once
// each, with their values in the context.
func TestDeltaOf(t *testing.T) {
	ctx := map[string]string{"a": "0", "b": "1", "c": "2", "z": "9"}
	got := deltaOf(ctx, []string{"z", "b", "b"}, "a")
	require.Equal(t, fmt.Sprint([]*pb.KV{{Key: "a", Value: "0"}, {Key: "b", Value: "1"}, {Key: "z", Value: "9"}}), fmt.Sprint(got))
	require.Empty(t, deltaOf(ctx, nil))
}

// TestWholeContext: a node's commit over no base carries its whole
// context, sorted; the same pairs as its last give the same list (shared,
// not made again), other pairs a list of their own — a value changed, a
// key more or less, another node.
func TestWholeContext(t *testing.T) {
	s := &System{}
	ctx := map[string]string{"outcome": "success", "current_node": "n"}
	first := s.wholeContext("n", ctx)
	require.Equal(t, fmt.Sprint([]*pb.KV{{Key: "current_node", Value: "n"}, {Key: "outcome", Value: "success"}}), fmt.Sprint(first))
	again := s.wholeContext("n", map[string]string{"current_node": "n", "outcome": "success"})
	require.Same(t, &first[0], &again[0], "the same pairs: the last list")
	for _, other := range []map[string]string{
		{"current_node": "n", "outcome": "fail"},
		{"current_node": "n", "outcome": "success", "k": "v"},
		{"current_node": "n"},
	} {
		got := s.wholeContext("n", other)
		require.Equal(t, fmt.Sprint(kvList(other)), fmt.Sprint(got))
		require.Equal(t, fmt.Sprint(got), fmt.Sprint(s.wholeContext("n", other)))
	}
	m := s.wholeContext("m", ctx)
	require.Equal(t, fmt.Sprint(first), fmt.Sprint(m))

	// A large context is not kept; nor are more than maxWholeNodes nodes'.
	large := map[string]string{}
	for i := range maxWholePairs + 1 {
		large["k"+fmt.Sprint(i)] = "v"
	}
	one := s.wholeContext("big", large)
	two := s.wholeContext("big", large)
	require.NotSame(t, &one[0], &two[0], "a large context is made each time")
	for i := range 2 * maxWholeNodes {
		s.wholeContext(fmt.Sprint("node", i), ctx)
	}
	require.LessOrEqual(t, s.wholeKept.Load(), int64(maxWholeNodes))
}

// TestResolveContext: an envelope's context is its whole context, or its
// delta over the context held in process for it, or the journal's; a base
// found nowhere or at another version is ErrContext, never an empty
// context.
func TestResolveContext(t *testing.T) {
	journal := map[string]map[string]string{"s.j": {"k": "journal", "n": "1"}}
	s := &System{cfg: Config{Contexts: func(id string) (map[string]string, uint64, bool) {
		m, ok := journal[id]
		if !ok {
			return nil, 0, false
		}
		return map[string]string{"k": m["k"], "n": m["n"]}, 4, true
	}}}
	delta := func(id string, v uint64, kvs ...*pb.KV) *pb.Envelope {
		return &pb.Envelope{Id: id, ContextBase: "s.base", ContextVersion: v, Context: kvs}
	}

	t.Run("whole, from outside", func(t *testing.T) {
		tc, err := s.resolveContext(&pb.Envelope{Id: "o", Context: []*pb.KV{{Key: "k", Value: "v"}}})
		require.NoError(t, err)
		require.Equal(t, map[string]string{"k": "v"}, tc.m)
		require.Empty(t, tc.base, "an outside envelope cannot be named as a base")
	})
	t.Run("whole, the runtime's", func(t *testing.T) {
		tc, err := s.resolveContext(&pb.Envelope{Id: "s.in", ContextVersion: 1, Context: []*pb.KV{{Key: "k", Value: "v"}}})
		require.NoError(t, err)
		require.Equal(t, "s.in", tc.base)
		require.EqualValues(t, 1, tc.version)
	})
	t.Run("held in process, given away", func(t *testing.T) {
		m := map[string]string{"k": "held", "x": "1"}
		s.ctxs.put("s.a", ctxEntry{m: m, owned: true, version: 3})
		tc, err := s.resolveContext(delta("s.a", 3, &pb.KV{Key: "x", Value: "1"}, &pb.KV{Key: "join.missing", Value: "b"}))
		require.NoError(t, err)
		require.Equal(t, map[string]string{"k": "held", "x": "1", "join.missing": "b"}, tc.m)
		m["probe"] = "same map"
		require.Equal(t, "same map", tc.m["probe"], "the receiver takes the map itself: no copy")
		require.Equal(t, "s.a", tc.base)
		require.Zero(t, s.ctxs.len(), "taken")
	})
	t.Run("held in process, shared", func(t *testing.T) {
		m := map[string]string{"k": "shared"}
		s.ctxs.put("s.b", ctxEntry{m: m, version: 2})
		tc, err := s.resolveContext(delta("s.b", 2))
		require.NoError(t, err)
		tc.m["mine"] = "1"
		require.NotContains(t, m, "mine", "a shared context is copied")
	})
	t.Run("from the journal", func(t *testing.T) {
		tc, err := s.resolveContext(delta("s.j", 4, &pb.KV{Key: "n", Value: "1"}))
		require.NoError(t, err)
		require.Equal(t, map[string]string{"k": "journal", "n": "1"}, tc.m)
	})
	t.Run("from the journal, through its base", func(t *testing.T) {
		// The journal lost the envelope's producer's record (a sparse
		// policy and a crash) but holds the envelope it consumed.
		env := &pb.Envelope{Id: "s.lost", ContextBase: "s.j", ContextVersion: 5, Context: []*pb.KV{{Key: "d", Value: "1"}}}
		tc, err := s.resolveContext(env)
		require.NoError(t, err)
		require.Equal(t, map[string]string{"k": "journal", "n": "1", "d": "1"}, tc.m)
		env.ContextVersion = 7
		_, err = s.resolveContext(env)
		require.ErrorIs(t, err, ErrContext)
	})
	t.Run("another version", func(t *testing.T) {
		s.ctxs.put("s.c", ctxEntry{m: map[string]string{}, owned: true, version: 7})
		_, err := s.resolveContext(delta("s.c", 8))
		require.True(t, errors.Is(err, ErrContext), err)
		_, err = s.resolveContext(delta("s.j", 5))
		require.True(t, errors.Is(err, ErrContext), err)
	})
	t.Run("nowhere", func(t *testing.T) {
		_, err := s.resolveContext(delta("s.gone", 2, &pb.KV{Key: "k", Value: "v"}))
		require.ErrorIs(t, err, ErrContext)
		require.Contains(t, err.Error(), "s.base")
	})
}

// TestContextStoreBound: at its bound the store holds nothing more (it
// evicts nothing) and counts what it refused; take and drop forget entries.
func TestContextStoreBound(t *testing.T) {
	defer SetContextStoreBound(2)()
	var s ctxStore
	require.Zero(t, s.put("a", ctxEntry{}))
	require.Zero(t, s.put("b", ctxEntry{}))
	require.Zero(t, s.put("b", ctxEntry{version: 2}), "replacing is not growing")
	require.EqualValues(t, 1, s.put("c", ctxEntry{}))
	require.EqualValues(t, 2, s.put("d", ctxEntry{}))
	require.Equal(t, 2, s.len())
	_, ok := s.take("c")
	require.False(t, ok, "c was not held")
	e, ok := s.take("b")
	require.True(t, ok, "nothing held was evicted")
	require.EqualValues(t, 2, e.version)
	s.drop([]*pb.Envelope{{Id: "a"}})
	require.Zero(t, s.len())
}
