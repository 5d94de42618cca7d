package actors

import (
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A pinned runner runs what it is given in order on a goroutine that ends
// when nothing is left; inline (while spawn starts an actor) it runs on the
// caller's goroutine, and what that schedules runs after it, in order.
func TestPinned(t *testing.T) {
	var wg sync.WaitGroup
	pool := &warmPool{wg: &wg}
	p := &pinned{pool: pool}
	var mu sync.Mutex
	var got []int
	add := func(i int) func() {
		return func() {
			mu.Lock()
			got = append(got, i)
			mu.Unlock()
		}
	}

	p.setInline(true)
	ran := false
	p.Schedule(func() {
		add(1)()
		ran = true
		p.Schedule(add(2)) // queued behind the inline one
		p.Schedule(add(3))
	})
	require.True(t, ran, "run before Schedule returned")
	p.setInline(false)
	fourth := make(chan struct{})
	p.Schedule(func() { add(4)(); close(fourth) })
	select {
	case <-fourth:
	case <-time.After(10 * time.Second):
		t.Fatal("the queued work never ran")
	}
	pool.close()
	wg.Wait() // every goroutine of the pool ended
	require.Equal(t, []int{1, 2, 3, 4}, got)

	p.stop()
	p.Schedule(add(5))
	require.Equal(t, []int{1, 2, 3, 4}, got, "dropped after stop")
}

// Work handed off from a pinned runner's function (handOff) runs once that
// function returns, on the same goroutine when nothing else waits there,
// and the runner is free meanwhile: what is scheduled on it then runs too.
// Work claimed on the way back (claim) waits for the function that claimed
// it and then runs, and nothing scheduled on the claimed runner meanwhile
// is lost.
func TestPinnedHandOff(t *testing.T) {
	var wg sync.WaitGroup
	pool := &warmPool{wg: &wg}
	mailbox, runner := &pinned{pool: pool}, &pinned{pool: pool}
	steps := make(chan string, 8)
	done := make(chan struct{})
	mailbox.Schedule(func() {
		mailbox.handOff(runner, func() {
			steps <- "handler"
			if !runner.claim(mailbox) {
				t.Error("the mailbox was idle but not claimed")
			}
			mailbox.Schedule(func() { steps <- "outcome"; close(done) })
			steps <- "claimed"
		})
		steps <- "mailbox returns"
	})
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the handed-off work never ran")
	}
	close(steps)
	var got []string
	for s := range steps {
		got = append(got, s)
	}
	require.Equal(t, []string{"mailbox returns", "handler", "claimed", "outcome"}, got)
	pool.close()
	wg.Wait()
}

// A mailbox that never runs dry does not hold up the work it handed off:
// after maxTailAge more messages (ageTail) it gets a goroutine of its own.
func TestPinnedHandOffFlood(t *testing.T) {
	var wg sync.WaitGroup
	pool := &warmPool{wg: &wg}
	mailbox, runner := &pinned{pool: pool}, &pinned{pool: pool}
	ran := make(chan struct{})
	release := make(chan struct{})
	mailbox.Schedule(func() {
		mailbox.handOff(runner, func() { close(ran) })
		// The flood: this function does not return while messages come.
		for i := 0; ; i++ {
			if !mailbox.ageTail() {
				break
			}
			if i >= maxTailAge {
				t.Error("the work waited past maxTailAge messages")
				break
			}
		}
		select {
		case <-ran: // ran while this function still runs
		case <-time.After(10 * time.Second):
			t.Error("the handed-off work did not run while the mailbox was busy")
		}
		close(release)
	})
	<-release
	pool.close()
	wg.Wait()
}

// goid is the calling goroutine's number (from its stack's first line).
func goid() string {
	var buf [64]byte
	n := runtime.Stack(buf[:], false)
	f := strings.Fields(string(buf[:n]))
	if len(f) < 2 {
		return ""
	}
	return f[1]
}

// While a pinned runner's function carries (warmPool.carry), the next
// runner that needs a goroutine runs on the carrier's goroutine once that
// function returns — whoever scheduled it; a carrier not taken is let go
// (uncarry), and what is scheduled afterwards gets a goroutine of its own.
func TestPinnedCarry(t *testing.T) {
	var wg sync.WaitGroup
	pool := &warmPool{wg: &wg}
	io, next, other := &pinned{pool: pool}, &pinned{pool: pool}, &pinned{pool: pool}
	steps := make(chan string, 8)
	wait := func(c chan struct{}, what string) {
		t.Helper()
		select {
		case <-c:
		case <-time.After(10 * time.Second):
			t.Fatal(what + " never ran")
		}
	}

	// Taken by a Schedule on the carrier's goroutine.
	var carrierG, nextG string
	ran := make(chan struct{})
	io.Schedule(func() {
		carrierG = goid()
		pool.carry(io)
		defer pool.uncarry(io)
		next.Schedule(func() { nextG = goid(); steps <- "next"; close(ran) })
		steps <- "io returns"
	})
	wait(ran, "the carried runner")
	require.Equal(t, "io returns", <-steps)
	require.Equal(t, "next", <-steps)
	require.Equal(t, carrierG, nextG, "the carried runner ran on the carrier's goroutine")

	// Taken by a Schedule from another goroutine while the carrier's
	// function runs: it still runs, once that function returned. (A
	// runner of its own: the first one's goroutine may not have let go of
	// it yet, and what is scheduled on a running runner runs there.)
	ran = make(chan struct{})
	scheduled := make(chan struct{})
	next2 := &pinned{pool: pool}
	io.Schedule(func() {
		pool.carry(io)
		defer pool.uncarry(io)
		go func() { next2.Schedule(func() { steps <- "next"; close(ran) }); close(scheduled) }()
		wait(scheduled, "the other goroutine's Schedule")
		steps <- "io returns"
	})
	wait(ran, "the runner scheduled from another goroutine")
	require.Equal(t, "io returns", <-steps)
	require.Equal(t, "next", <-steps)

	// Not taken: let go, and nothing later waits on a carrier that is gone.
	done := make(chan struct{})
	io.Schedule(func() {
		pool.carry(io)
		pool.uncarry(io)
		close(done)
	})
	wait(done, "the carrier")
	ran = make(chan struct{})
	other.Schedule(func() { close(ran) })
	wait(ran, "a runner scheduled after the carrier was let go")

	pool.close()
	wg.Wait()
}
