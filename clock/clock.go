// Package clock is the injectable time source of Switchyard. Debounce
// buffers, cron triggers, join timeouts, budgets and stall detection read a
// Clock so that tests can drive time with a Fake clock instead of sleeping.
package clock

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Clock tells time and makes timers.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has elapsed.
	AfterFunc(d time.Duration, f func()) Timer
	// NewTimer returns a timer whose channel receives the time after d.
	NewTimer(d time.Duration) Timer
}

// Timer is a stoppable timer.
type Timer interface {
	// C is the channel the time is sent on (nil for AfterFunc timers).
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it was pending.
	Stop() bool
	// Reset changes the timer to fire after d; it reports whether it was pending.
	Reset(d time.Duration) bool
}

// Real is the system clock.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) Timer {
	return realTimer{t: time.AfterFunc(d, f)}
}
func (realClock) NewTimer(d time.Duration) Timer { return realTimer{t: time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

// Fake is a manually advanced clock for tests. Timers fire during Advance,
// in deadline order; AfterFunc callbacks run synchronously inside Advance so
// that a test observes their effects when Advance returns.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer
	seq     int
	waiters []chan struct{}
}

// NewFake returns a fake clock set to start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// AfterFunc schedules fn to run when the clock is advanced past d.
func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer {
	return f.add(d, fn, nil)
}

// NewTimer returns a timer whose channel (buffered, capacity 1) receives the
// fake time when the clock is advanced past d.
func (f *Fake) NewTimer(d time.Duration) Timer {
	return f.add(d, nil, make(chan time.Time, 1))
}

func (f *Fake) add(d time.Duration, fn func(), ch chan time.Time) *fakeTimer {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	t := &fakeTimer{clock: f, when: f.now.Add(d), fn: fn, ch: ch, seq: f.seq, active: true}
	f.timers = append(f.timers, t)
	f.notifyLocked()
	return t
}

func (f *Fake) notifyLocked() {
	for _, w := range f.waiters {
		close(w)
	}
	f.waiters = nil
}

// Pending returns the number of timers that have not fired or been stopped.
func (f *Fake) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, t := range f.timers {
		if t.active {
			n++
		}
	}
	return n
}

// Changed returns a channel closed the next time a timer is created or reset.
// Tests use it to wait, with a deadline, until a component has armed its
// timer before they advance the clock.
func (f *Fake) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan struct{})
	f.waiters = append(f.waiters, ch)
	return ch
}

// Advance moves the clock forward by d, firing every timer whose deadline is
// reached, in order of deadline (then creation).
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	target := f.now.Add(d)
	for {
		var next *fakeTimer
		active := f.timers[:0]
		for _, t := range f.timers {
			if t.active {
				active = append(active, t)
			}
		}
		f.timers = active
		sort.SliceStable(f.timers, func(i, j int) bool {
			if !f.timers[i].when.Equal(f.timers[j].when) {
				return f.timers[i].when.Before(f.timers[j].when)
			}
			return f.timers[i].seq < f.timers[j].seq
		})
		if len(f.timers) > 0 && !f.timers[0].when.After(target) {
			next = f.timers[0]
		}
		if next == nil {
			break
		}
		next.active = false
		if next.when.After(f.now) {
			f.now = next.when
		}
		now := f.now
		f.mu.Unlock()
		if next.fn != nil {
			next.fn()
		} else {
			select {
			case next.ch <- now:
			default:
			}
		}
		f.mu.Lock()
	}
	f.now = target
	f.mu.Unlock()
}

// Set moves the clock to t (forward only), firing due timers.
func (f *Fake) Set(t time.Time) {
	d := t.Sub(f.Now())
	if d > 0 {
		f.Advance(d)
	}
}

type fakeTimer struct {
	clock  *Fake
	when   time.Time
	fn     func()
	ch     chan time.Time
	seq    int
	active bool
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	was := t.active
	t.active = false
	return was
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	f := t.clock
	f.mu.Lock()
	defer f.mu.Unlock()
	was := t.active
	t.when = f.now.Add(d)
	f.seq++
	t.seq = f.seq
	if !t.active {
		t.active = true
		found := false
		for _, x := range f.timers {
			if x == t {
				found = true
			}
		}
		if !found {
			f.timers = append(f.timers, t)
		}
	}
	f.notifyLocked()
	return was
}

// Sleep waits d on c, or until ctx ends; it reports whether d passed.
func Sleep(ctx context.Context, c Clock, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}

// WithDeadline is context.WithDeadline on c: the returned context is done
// when c reaches d (its Err is then context.DeadlineExceeded) or when the
// parent is. On the real clock it is context.WithDeadline; on a Fake clock
// the deadline passes only when the test advances the clock past it.
func WithDeadline(parent context.Context, c Clock, d time.Time) (context.Context, context.CancelFunc) {
	return WithDeadlineCause(parent, c, d, nil)
}

// WithTimeout is WithDeadline(parent, c, c.Now().Add(timeout)).
func WithTimeout(parent context.Context, c Clock, timeout time.Duration) (context.Context, context.CancelFunc) {
	return WithDeadline(parent, c, c.Now().Add(timeout))
}

// WithDeadlineCause is WithDeadline that sets the context's cause (see
// context.Cause) to cause when the deadline passes; a nil cause means
// context.DeadlineExceeded. Contexts derived from the returned one see
// context.DeadlineExceeded too, as with the context package's deadlines.
func WithDeadlineCause(parent context.Context, c Clock, d time.Time, cause error) (context.Context, context.CancelFunc) {
	if _, ok := c.(realClock); ok || c == nil {
		return context.WithDeadlineCause(parent, d, cause)
	}
	if cause == nil {
		cause = context.DeadlineExceeded
	}
	inner, cancelInner := context.WithCancelCause(parent)
	outer, cancelOuter := context.WithCancel(context.Background())
	dc := &deadlineCtx{inner: inner, outer: outer, deadline: d}
	// outer is done once inner is and the error is decided: Done and
	// AfterFunc (how derived contexts follow this one) watch it.
	context.AfterFunc(inner, func() {
		dc.mu.Lock()
		if dc.err == nil {
			dc.err = inner.Err()
		}
		dc.mu.Unlock()
		cancelOuter()
	})
	expire := func() {
		dc.mu.Lock()
		if dc.err == nil && inner.Err() == nil {
			dc.err = context.DeadlineExceeded
		}
		dc.mu.Unlock()
		cancelInner(cause)
		cancelOuter()
	}
	stop := func() {
		cancelInner(context.Canceled)
		dc.mu.Lock()
		if dc.err == nil {
			dc.err = inner.Err()
		}
		dc.mu.Unlock()
		cancelOuter()
	}
	left := d.Sub(c.Now())
	if left <= 0 {
		expire()
		return dc, stop
	}
	t := c.AfterFunc(left, expire)
	return dc, func() {
		t.Stop()
		stop()
	}
}

// deadlineCtx is a context whose deadline is kept by a Clock.
type deadlineCtx struct {
	inner    context.Context // cancelled (with the cause) when it ends
	outer    context.Context // done once err is set
	deadline time.Time
	mu       sync.Mutex
	err      error
}

func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }
func (c *deadlineCtx) Done() <-chan struct{}       { return c.outer.Done() }
func (c *deadlineCtx) Value(key any) any           { return c.inner.Value(key) }

func (c *deadlineCtx) Err() error {
	select {
	case <-c.outer.Done():
	default:
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// AfterFunc lets contexts derived from c follow it without a goroutine
// each (the context package looks for this method).
func (c *deadlineCtx) AfterFunc(f func()) func() bool { return context.AfterFunc(c.outer, f) }
