package edges_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/edges"
	"github.com/switchyard/switchyard/edges/edgetest"
)

func TestQueueConformance(t *testing.T) {
	edgetest.Run(t, edgetest.Features{KeepsAll: true, Immediate: true}, func() edges.Buffer[int] { return edges.NewQueue[int]() })
}

func TestLatestConformance(t *testing.T) {
	edgetest.Run(t, edgetest.Features{Immediate: true}, func() edges.Buffer[int] { return edges.NewLatest[int]() })
}

func TestDebounceConformance(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	edgetest.Run(t, edgetest.Features{Settle: func() { clk.Advance(time.Second) }},
		func() edges.Buffer[int] { return edges.NewDebounce[int](time.Second, clk, nil) })
}

func TestDebounceWaitsForQuiet(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	var ready atomic.Int32
	b := edges.NewDebounce[string](2*time.Second, clk, func() { ready.Add(1) })
	defer b.Close()
	b.Push("a")
	clk.Advance(1500 * time.Millisecond)
	b.Push("b") // the edge is not quiet yet: the window restarts
	clk.Advance(1500 * time.Millisecond)
	_, ok := b.Pop()
	require.False(t, ok, "3s after a, but only 1.5s after b")
	require.EqualValues(t, 0, ready.Load())
	clk.Advance(500 * time.Millisecond)
	require.EqualValues(t, 1, ready.Load(), "ready is called once the edge is quiet")
	v, ok := b.Pop()
	require.True(t, ok)
	require.Equal(t, "b", v, "the newest is delivered")
	require.EqualValues(t, 1, b.Dropped())
	b.Push("c")
	require.Equal(t, []string{"c"}, b.Pending(), "held items are visible for checkpoints")
	b.Close()
	clk.Advance(time.Hour)
	_, ok = b.Pop()
	require.False(t, ok, "a closed buffer delivers nothing more")
}

func TestLatestCountsDrops(t *testing.T) {
	b := edges.NewLatest[int]()
	b.Push(1)
	b.Push(2)
	b.Push(3)
	require.EqualValues(t, 2, b.Dropped())
	v, _ := b.Pop()
	require.Equal(t, 3, v)
}

func TestParseMode(t *testing.T) {
	for s, want := range map[string]edges.Mode{"": edges.Queue, "queue": edges.Queue, "latest": edges.Latest, "debounce": edges.Debounce} {
		got, err := edges.ParseMode(s)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	_, err := edges.ParseMode("sometimes")
	require.Error(t, err)
	_, err = edges.New[int](edges.Debounce, 0, nil, nil)
	require.Error(t, err)
}

func BenchmarkQueuePushPop(b *testing.B) {
	q := edges.NewQueue[int]()
	for i := 0; i < b.N; i++ {
		q.Push(i)
		q.Pop()
	}
}

func BenchmarkLatestPushPop(b *testing.B) {
	q := edges.NewLatest[int]()
	for i := 0; i < b.N; i++ {
		q.Push(i)
		q.Pop()
	}
}

func BenchmarkDebouncePush(b *testing.B) {
	q := edges.NewDebounce[int](time.Second, clock.NewFake(time.Unix(0, 0)), nil)
	for i := 0; i < b.N; i++ {
		q.Push(i)
	}
}
