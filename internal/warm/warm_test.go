package warm

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// idleCount is how many goroutines wait in p.
func (p *Pool) idleCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// waitIdle waits until p has n goroutines waiting.
func waitIdle(t *testing.T, p *Pool, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for p.idleCount() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines wait, want %d", p.idleCount(), n)
		}
		runtime.Gosched()
	}
}

// goroutineID is the running goroutine's id, from the first line of
// runtime.Stack.
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	for i := len("goroutine "); i < len(buf); i++ {
		if buf[i] == ' ' {
			return string(buf[len("goroutine "):i])
		}
	}
	return string(buf)
}

func TestGoRunsOnAGoroutineKept(t *testing.T) {
	p := New(2)
	defer p.Close()
	ids := make(chan string, 3)
	for range 3 {
		if !p.Go(func() { ids <- goroutineID() }) {
			t.Fatal("Go refused on an open pool")
		}
		waitIdle(t, p, 1) // the one goroutine, back and waiting
	}
	first := <-ids
	for range 2 {
		if id := <-ids; id != first {
			t.Fatalf("ran on goroutine %s, then on %s: the first was not kept", first, id)
		}
	}
	if first == goroutineID() {
		t.Fatal("ran on the caller's goroutine")
	}
}

func TestKeepsNoMoreThanItsMaximum(t *testing.T) {
	p := New(2)
	defer p.Close()
	var release sync.WaitGroup
	release.Add(1)
	var started sync.WaitGroup
	for range 5 {
		started.Add(1)
		p.Go(func() { started.Done(); release.Wait() })
	}
	started.Wait() // five at once: five goroutines
	release.Done()
	waitIdle(t, p, 2) // two kept, three ended
	before := runtime.NumGoroutine()
	done := make(chan struct{})
	p.Go(func() { close(done) })
	<-done
	waitIdle(t, p, 2)
	if after := runtime.NumGoroutine(); after > before {
		t.Fatalf("%d goroutines after running on a kept one, %d before", after, before)
	}
}

func TestCloseEndsTheWaitingAndRefusesMore(t *testing.T) {
	p := New(4)
	running := make(chan struct{})
	finish := make(chan struct{})
	p.Go(func() {})
	waitIdle(t, p, 1)
	p.Go(func() { close(running); <-finish }) // takes the kept one
	<-running
	p.Go(func() {})
	waitIdle(t, p, 1)

	p.Close() // ends the waiting one; the running one is its caller's
	if p.Go(func() { t.Error("ran after Close") }) {
		t.Fatal("Go accepted a function after Close")
	}
	close(finish) // the running one ends once its function returns (goleak checks)
}
