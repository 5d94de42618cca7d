package clock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/clock"
)

func TestFakeFiresInOrder(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := clock.NewFake(start)
	var order []string
	f.AfterFunc(3*time.Second, func() { order = append(order, "c") })
	f.AfterFunc(time.Second, func() { order = append(order, "a") })
	stopped := f.AfterFunc(2*time.Second, func() { order = append(order, "never") })
	tm := f.NewTimer(2 * time.Second)
	require.True(t, stopped.Stop())
	require.Equal(t, 3, f.Pending())
	f.Advance(2500 * time.Millisecond)
	require.Equal(t, []string{"a"}, order)
	select {
	case at := <-tm.C():
		require.Equal(t, start.Add(2*time.Second), at, "a timer receives its deadline")
	default:
		t.Fatal("the timer did not fire")
	}
	f.Advance(time.Second)
	require.Equal(t, []string{"a", "c"}, order)
	require.Equal(t, start.Add(3500*time.Millisecond), f.Now())
}

func TestFakeReset(t *testing.T) {
	f := clock.NewFake(time.Unix(0, 0))
	fired := 0
	tm := f.AfterFunc(time.Second, func() { fired++ })
	f.Advance(900 * time.Millisecond)
	require.True(t, tm.Reset(time.Second), "pending when reset")
	f.Advance(900 * time.Millisecond)
	require.Equal(t, 0, fired, "the reset pushed the deadline")
	f.Advance(100 * time.Millisecond)
	require.Equal(t, 1, fired)
	require.False(t, tm.Reset(time.Second), "not pending after firing")
	f.Advance(time.Second)
	require.Equal(t, 2, fired, "a reset timer fires again")
}

func TestChangedSignalsNewTimers(t *testing.T) {
	f := clock.NewFake(time.Unix(0, 0))
	ch := f.Changed()
	go f.AfterFunc(time.Minute, func() {})
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("Changed was not closed when a timer was created")
	}
}

func TestReal(t *testing.T) {
	c := clock.Real()
	done := make(chan struct{})
	c.AfterFunc(time.Millisecond, func() { close(done) })
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a real timer did not fire")
	}
	require.WithinDuration(t, time.Now(), c.Now(), time.Second)
}

func TestWithTimeoutOnFakeClock(t *testing.T) {
	f := clock.NewFake(time.Unix(0, 0))
	ctx, cancel := clock.WithTimeout(context.Background(), f, time.Minute)
	defer cancel()
	dl, ok := ctx.Deadline()
	require.True(t, ok)
	require.Equal(t, time.Unix(60, 0), dl, "the deadline is on the fake clock")
	f.Advance(59 * time.Second)
	require.NoError(t, ctx.Err(), "not done before the fake deadline")
	f.Advance(time.Second)
	select {
	case <-ctx.Done():
	default:
		t.Fatal("the context is not done at its fake deadline")
	}
	require.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
	require.ErrorIs(t, context.Cause(ctx), context.DeadlineExceeded)
	cancel()
	require.ErrorIs(t, ctx.Err(), context.DeadlineExceeded, "a later cancel does not change the error")
}

func TestWithDeadlineCauseAndCancel(t *testing.T) {
	f := clock.NewFake(time.Unix(0, 0))
	why := errors.New("the time budget ran out")
	ctx, cancel := clock.WithDeadlineCause(context.Background(), f, time.Unix(10, 0), why)
	f.Advance(10 * time.Second)
	require.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
	require.ErrorIs(t, context.Cause(ctx), why)
	cancel()

	ctx, cancel = clock.WithDeadline(context.Background(), f, f.Now().Add(time.Second))
	cancel()
	require.ErrorIs(t, ctx.Err(), context.Canceled, "cancelled before the deadline")
	require.Equal(t, 0, f.Pending(), "cancel stops the clock's timer")
	f.Advance(time.Hour)
	require.ErrorIs(t, ctx.Err(), context.Canceled)

	past, cancel := clock.WithDeadline(context.Background(), f, f.Now().Add(-time.Second))
	defer cancel()
	require.ErrorIs(t, past.Err(), context.DeadlineExceeded, "a deadline already past is done at once")

	parent, pcancel := context.WithCancel(context.Background())
	child, cancel := clock.WithTimeout(parent, f, time.Hour)
	defer cancel()
	pcancel()
	<-child.Done()
	require.ErrorIs(t, child.Err(), context.Canceled, "the parent's cancel reaches the child")
	f.Advance(2 * time.Hour)
	require.ErrorIs(t, child.Err(), context.Canceled)
}

func TestWithTimeoutOnRealClock(t *testing.T) {
	ctx, cancel := clock.WithTimeout(context.Background(), clock.Real(), -time.Second)
	defer cancel()
	require.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
}

func TestDerivedContextsSeeTheDeadline(t *testing.T) {
	f := clock.NewFake(time.Unix(0, 0))
	why := errors.New("budget")
	ctx, cancel := clock.WithDeadlineCause(context.Background(), f, time.Unix(10, 0), why)
	defer cancel()
	child, ccancel := context.WithCancel(ctx)
	defer ccancel()
	f.Advance(10 * time.Second)
	<-child.Done()
	require.ErrorIs(t, child.Err(), context.DeadlineExceeded, "a derived context sees the deadline")
	require.ErrorIs(t, context.Cause(child), why)
}
