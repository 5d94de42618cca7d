package actors

import (
	"context"
	"sync"
	"time"
)

// firingCtx is a firing's context: a child of the System's (or the
// caller's) context that the actor cancels with a cause (errBudgetCancel)
// when the scheduler cancels the firing, and when the firing ends.
//
// Most handlers never look at their context's Done channel or values:
// the cancelable context (context.WithCancelCause, registered with its
// parent under the parent's lock) is made only when one does (Done,
// Value — which context.Cause and a child context's creation use), and
// a cancellation that comes before is kept and applied to it when it is
// made. Until then Err and Deadline answer from the parent and the kept
// cause, as the cancelable context would: an error once the parent or
// the firing is cancelled, and the parent's deadline.
type firingCtx struct {
	base context.Context

	mu     sync.Mutex
	inner  context.Context         // made on first need (made)
	cancel context.CancelCauseFunc // inner's
	cause  error                   // the firing's cancellation, when it came before inner
}

func newFiringCtx(base context.Context) *firingCtx { return &firingCtx{base: base} }

// made returns the cancelable context, making it on the first call.
func (f *firingCtx) made() context.Context {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.inner == nil {
		if f.cause == nil {
			f.inner, f.cancel = context.WithCancelCause(f.base)
		} else {
			// Cancelled before the parent was: the firing's cause stands,
			// whatever the parent did since.
			f.inner, f.cancel = context.WithCancelCause(context.WithoutCancel(f.base))
			f.cancel(f.cause)
		}
	}
	return f.inner
}

// cancelCause cancels the firing with cause; the first cancellation's
// cause is the one kept, as with context.WithCancelCause.
func (f *firingCtx) cancelCause(cause error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.inner != nil {
		f.cancel(cause)
		return
	}
	if f.cause == nil {
		if err := f.base.Err(); err != nil {
			return // the parent's cancellation came first: made() inherits its cause
		}
		f.cause = cause
	}
}

func (f *firingCtx) Deadline() (time.Time, bool) { return f.base.Deadline() }

func (f *firingCtx) Done() <-chan struct{} { return f.made().Done() }

func (f *firingCtx) Value(key any) any { return f.made().Value(key) }

func (f *firingCtx) Err() error {
	f.mu.Lock()
	inner, cause := f.inner, f.cause
	f.mu.Unlock()
	switch {
	case inner != nil:
		return inner.Err()
	case cause != nil:
		return context.Canceled
	}
	select {
	case <-f.base.Done(): // a receive that does not wait takes no lock, where Err does
		return f.base.Err()
	default:
		return nil
	}
}

func (f *firingCtx) String() string { return "actors.firingCtx" }
