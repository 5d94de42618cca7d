package edges_test

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/edges"
	"github.com/switchyard/switchyard/edges/edgetest"
)

func TestConformance(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	for _, tc := range []struct {
		f    edgetest.Features
		ctor edgetest.Constructor
	}{
		{edgetest.Features{Mode: edges.Queue}, func(func()) edges.Buffer[int] { return edges.NewQueue[int]() }},
		{edgetest.Features{Mode: edges.Latest}, func(func()) edges.Buffer[int] { return edges.NewLatest[int]() }},
		{edgetest.Features{Mode: edges.Debounce, Window: 2 * time.Second, Clock: clk},
			func(ready func()) edges.Buffer[int] { return edges.NewDebounce[int](2*time.Second, clk, ready) }},
	} {
		t.Run(tc.f.Mode.String(), func(t *testing.T) { edgetest.Run(t, tc.f, tc.ctor) })
	}
	t.Run("through New", func(t *testing.T) {
		for _, m := range []edges.Mode{edges.Queue, edges.Latest, edges.Debounce} {
			t.Run(m.String(), func(t *testing.T) {
				edgetest.Run(t, edgetest.Features{Mode: m, Window: time.Second, Clock: clk}, func(ready func()) edges.Buffer[int] {
					b, err := edges.New[int](m, time.Second, clk, ready)
					require.NoError(t, err)
					return b
				})
			})
		}
	})
}

func TestParseMode(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want edges.Mode
		err  bool
	}{
		{"", edges.Queue, false},
		{"queue", edges.Queue, false},
		{"latest", edges.Latest, false},
		{"debounce", edges.Debounce, false},
		{"Latest", edges.Queue, true},
		{"sometimes", edges.Queue, true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := edges.ParseMode(tc.in)
			if tc.err {
				require.ErrorContains(t, err, "unknown delivery mode")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			if tc.in != "" {
				require.Equal(t, tc.in, got.String())
			}
		})
	}
	require.Equal(t, "Mode(7)", edges.Mode(7).String())
}

func TestNew(t *testing.T) {
	_, err := edges.New[int](edges.Debounce, 0, nil, nil)
	require.ErrorContains(t, err, "positive")
	_, err = edges.New[int](edges.Mode(9), time.Second, nil, nil)
	require.ErrorContains(t, err, "unknown")
	b, err := edges.New[int](edges.Queue, 0, nil, nil)
	require.NoError(t, err)
	require.IsType(t, &edges.QueueBuffer[int]{}, b)
	b, err = edges.New[int](edges.Latest, time.Hour, nil, nil)
	require.NoError(t, err)
	require.IsType(t, &edges.LatestBuffer[int]{}, b)
}

func TestDelivery(t *testing.T) {
	for _, tc := range []struct {
		name     string
		kv       []string
		mode     edges.Mode
		window   time.Duration
		errMatch string
	}{
		{"default", nil, edges.Queue, 0, ""},
		{"queue ignores a window", []string{"delivery", "queue", "debounce", "2s"}, edges.Queue, 0, ""},
		{"latest", []string{"delivery", "latest"}, edges.Latest, 0, ""},
		{"debounce", []string{"delivery", "debounce", "debounce", "2s"}, edges.Debounce, 2 * time.Second, ""},
		{"debounce ms", []string{"delivery", "debounce", "debounce", "250ms"}, edges.Debounce, 250 * time.Millisecond, ""},
		{"debounce seconds", []string{"delivery", "debounce", "debounce", "3"}, edges.Debounce, 3 * time.Second, ""},
		{"debounce without window", []string{"delivery", "debounce"}, edges.Debounce, 0, "needs a debounce window"},
		{"debounce bad window", []string{"delivery", "debounce", "debounce", "soon"}, edges.Debounce, 0, "debounce=\"soon\""},
		{"debounce zero window", []string{"delivery", "debounce", "debounce", "0s"}, edges.Debounce, 0, "positive"},
		{"unknown", []string{"delivery", "often"}, edges.Queue, 0, "unknown delivery mode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := edge("b", tc.kv...)
			e.From = "a"
			mode, window, err := edges.Delivery(e)
			if tc.errMatch != "" {
				require.ErrorContains(t, err, tc.errMatch)
				_, err = edges.NewFor[int](e, nil, nil)
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.mode, mode)
			require.Equal(t, tc.window, window)
			b, err := edges.NewFor[int](e, clock.NewFake(time.Unix(0, 0)), nil)
			require.NoError(t, err)
			b.Close()
		})
	}
}

// earlyClock hands out timers whose callback a test can call before its
// time, as a real timer does when it goes off just as a Push resets it.
type earlyClock struct {
	*clock.Fake
	fn func()
}

func (c *earlyClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.fn = f
	return c.Fake.AfterFunc(d, f)
}

func TestDebounceStaleTimerRearms(t *testing.T) {
	clk := &earlyClock{Fake: clock.NewFake(time.Unix(0, 0))}
	var ready atomic.Int32
	b := edges.NewDebounce[int](time.Second, clk, func() { ready.Add(1) })
	defer b.Close()
	b.Push(1)
	clk.Advance(900 * time.Millisecond)
	b.Push(2)
	clk.fn() // the timer of the first push, late
	require.Zero(t, b.Len(), "the edge has been quiet for 0s, not 1s")
	require.Zero(t, ready.Load())
	clk.Advance(999 * time.Millisecond)
	require.Zero(t, b.Len())
	clk.Advance(time.Millisecond)
	require.Equal(t, 1, b.Len())
	require.EqualValues(t, 1, ready.Load())
}

func TestDebounceRealClock(t *testing.T) {
	ready := make(chan struct{}, 1)
	// A window a loaded machine does not let pass between two Pushes (1 ms
	// did, under a load of 12 on two cores: "a" came out alone).
	b, err := edges.New[string](edges.Debounce, 200*time.Millisecond, nil, func() { ready <- struct{}{} })
	require.NoError(t, err)
	defer b.Close()
	b.Push("a")
	b.Push("b")
	select {
	case <-ready:
	case <-time.After(5 * time.Second):
		t.Fatal("the ready callback was not called")
	}
	v, ok := b.Pop()
	require.True(t, ok)
	require.Equal(t, "b", v)
	require.EqualValues(t, 1, b.Dropped())
}

// TestDebounceCloseWaitsForCallback: Close returns only after a running
// ready callback has returned.
func TestDebounceCloseWaitsForCallback(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	entered, release := make(chan struct{}), make(chan struct{})
	var done atomic.Bool
	b := edges.NewDebounce[int](time.Second, clk, func() {
		close(entered)
		<-release
		done.Store(true)
	})
	b.Push(1)
	advanced := make(chan struct{})
	go func() { clk.Advance(time.Second); close(advanced) }()
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the callback did not run")
	}
	// Close is called while the callback is blocked; it must not return
	// before the callback has.
	var doneAtClose atomic.Bool
	closed := make(chan struct{})
	go func() { b.Close(); doneAtClose.Store(done.Load()); close(closed) }()
	runtime.Gosched()
	close(release)
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return after the callback")
	}
	require.True(t, doneAtClose.Load(), "Close returned while the callback was running")
	<-advanced
}

func BenchmarkPushPop(b *testing.B) {
	b.Run("queue", func(b *testing.B) {
		q := edges.NewQueue[int]()
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			q.Push(i)
			q.Pop()
		}
	})
	b.Run("queue backlog 64", func(b *testing.B) {
		q := edges.NewQueue[int]()
		for i := 0; i < 64; i++ {
			q.Push(i)
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			q.Push(i)
			q.Pop()
		}
	})
	b.Run("latest", func(b *testing.B) {
		q := edges.NewLatest[int]()
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			q.Push(i)
			q.Pop()
		}
	})
	b.Run("debounce fake clock", func(b *testing.B) {
		clk := clock.NewFake(time.Unix(0, 0))
		q := edges.NewDebounce[int](time.Second, clk, nil)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			q.Push(i)
			clk.Advance(time.Second)
			if _, ok := q.Pop(); !ok {
				b.Fatal("nothing ready")
			}
		}
	})
	b.Run("debounce push real clock", func(b *testing.B) {
		q := edges.NewDebounce[int](time.Hour, clock.Real(), nil)
		defer q.Close()
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			q.Push(i)
			q.Pop()
		}
	})
}
