package actors

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type firingKey struct{}

// TestFiringCtx: a firing's context answers as context.WithCancelCause's
// would, whether its cancelable context was made before the cancellation
// (a handler waited on Done, made a child) or after (nobody looked).
func TestFiringCtx(t *testing.T) {
	errWhy := errors.New("why")
	closed := func(c <-chan struct{}) bool {
		select {
		case <-c:
			return true
		default:
			return false
		}
	}
	deadline := time.Now().Add(time.Hour)
	for _, early := range []bool{false, true} {
		parent, cancelParent := context.WithCancelCause(context.WithValue(context.Background(), firingKey{}, "v"))
		base, cancelBase := context.WithDeadline(parent, deadline)
		f := newFiringCtx(base)
		var child context.Context
		var stopChild context.CancelFunc
		if early {
			child, stopChild = context.WithCancel(f)
		}
		require.NoError(t, f.Err())
		d, ok := f.Deadline()
		require.True(t, ok)
		require.Equal(t, deadline, d)
		f.cancelCause(errWhy)
		f.cancelCause(errors.New("later")) // the first cause stands
		require.ErrorIs(t, f.Err(), context.Canceled, "early=%v", early)
		cancelParent(errors.New("parent")) // after the firing's: changes nothing
		require.ErrorIs(t, f.Err(), context.Canceled)
		require.Same(t, errWhy, context.Cause(f), "early=%v", early)
		require.True(t, closed(f.Done()))
		require.Equal(t, "v", f.Value(firingKey{}))
		if !early {
			child, stopChild = context.WithCancel(f)
		}
		require.True(t, closed(child.Done()), "a child is cancelled with its firing (early=%v)", early)
		require.Same(t, errWhy, context.Cause(child))
		stopChild()
		cancelBase()
	}

	// The parent cancelled first: its error and cause are the firing's.
	errStop := errors.New("stop")
	for _, early := range []bool{false, true} {
		parent, cancelParent := context.WithCancelCause(context.Background())
		f := newFiringCtx(parent)
		if early {
			_ = f.Done()
		}
		cancelParent(errStop)
		require.ErrorIs(t, f.Err(), context.Canceled)
		f.cancelCause(errWhy)
		require.Same(t, errStop, context.Cause(f), "early=%v", early)
		require.True(t, closed(f.Done()))
	}

	// Not cancelled: Done stays open, a child lives until the firing ends.
	f := newFiringCtx(context.Background())
	child, stop := context.WithCancel(f)
	defer stop()
	require.False(t, closed(f.Done()))
	require.False(t, closed(child.Done()))
	_, ok := f.Deadline()
	require.False(t, ok)
	f.cancelCause(errWhy)
	require.True(t, closed(child.Done()))
	require.Same(t, errWhy, context.Cause(child))
}
