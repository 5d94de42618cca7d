// Package warm runs short functions on goroutines that are kept between
// them, with their stacks.
//
// A goroutine starts with a small stack and grows it by copying it, frame
// by frame, the first time it goes deep: through encoding/json, a
// protobuf marshal, the scheduler's gate. The runtime's background work
// of a durable pipeline — its journal's writer, the removal of a finished
// store, the preparation of the next one — each ran on a goroutine of its
// own and paid that growth every time: 2-4% of a 10-node pipeline's CPU.
// A Pool keeps the goroutines that ran such work, waiting with a stack
// large enough for the next one.
package warm

import "sync"

// keptStack is the frame a waiting goroutine keeps on its stack. The
// collector halves the stack of a waiting goroutine that uses less than a
// quarter of it; with this frame the stack stays at 32 KB or more.
const keptStack = 16 << 10

// Pool runs functions on goroutines it keeps (up to its maximum of idle
// ones). Its owner closes it; the zero Pool is not usable (New).
type Pool struct {
	max    int
	mu     sync.Mutex
	idle   []*worker // waiting for a function, the last one to wait first
	closed bool
}

// worker is a goroutine of the pool waiting for its next function.
type worker struct {
	next chan func() // its next function; closed when the pool closes
	done chan struct{}
}

// New is a pool that keeps up to maxIdle goroutines waiting.
func New(maxIdle int) *Pool { return &Pool{max: maxIdle} }

// Go runs f on a goroutine of the pool: one that waits, or a new one. It
// reports false, without running f, once the pool is closed. f must end
// by itself: its caller owns what it does and waits for it.
func (p *Pool) Go(f func()) bool {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return false
	}
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		w.next <- f // buffered: taken when the goroutine wakes
		return true
	}
	p.mu.Unlock()
	go p.run(f)
	return true
}

// run runs f, then the functions given to it while the pool keeps it.
func (p *Pool) run(f func()) {
	var w *worker
	for f != nil {
		f()
		p.mu.Lock()
		if p.closed || len(p.idle) >= p.max {
			p.mu.Unlock()
			return
		}
		if w == nil {
			w = &worker{next: make(chan func(), 1), done: make(chan struct{})}
		}
		p.idle = append(p.idle, w)
		p.mu.Unlock()
		f = Receive(w.next)
	}
	close(w.done) // closed while it waited: Close waits for this
}

// Receive receives from c with a frame of keptStack bytes on the stack, so
// that the collector leaves the waiting goroutine's stack at 32 KB or more
// (it halves the stack of one that uses less than a quarter of it): a
// goroutine kept for more work waits here (the pool's, and the actors'
// warm pool's).
//
//go:noinline
func Receive[T any](c <-chan T) T {
	var frame [keptStack]byte
	keep(&frame)
	return <-c
}

//go:noinline
func keep(b *[keptStack]byte) { b[0] = 1 }

// Close ends the goroutines that wait and waits for them to end; one
// running a function ends once it returns (its caller waits for that).
// Go runs nothing after it.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, w := range idle {
		close(w.next)
	}
	for _, w := range idle {
		<-w.done
	}
}
