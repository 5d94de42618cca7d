package broker_test

import (
	"context"
	"testing"
	"time"
)

// ctx is a context bounded by the test's own deadline of 20s.
func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// eventually polls cond every poll until it holds, failing the test after
// total.
func eventually(t testing.TB, total, poll time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.NewTimer(total)
	defer deadline.Stop()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		ok, why := cond()
		if ok {
			return
		}
		select {
		case <-deadline.C:
			t.Fatalf("not within %v: %s", total, why)
		case <-tick.C:
		}
	}
}

// recv waits for one value on ch, failing the test after total.
func recv[T any](t testing.TB, ch <-chan T, total time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(total):
		t.Fatalf("no %s within %v", what, total)
	}
	var zero T
	return zero
}
