package actors

import (
	"runtime"
	"sync"

	"github.com/switchyard/switchyard/internal/warm"
)

// pinned runs the functions handed to it one at a time, in order, on a
// goroutine it gets when work arrives (from the System's warm pool, else a
// new one) and gives back when none is left.
// A node actor has two: one runs its mailbox (a protoactor Dispatcher) and
// one runs its handler and the I/O of its firings (a node runs one at a
// time). An idle node has no goroutine of its own: a session of 100,000
// nodes that wait costs no stacks; a busy one keeps its goroutine (and the
// stack it grew) for as long as work keeps coming.
//
// A node actor holds its two by value; spawn sets pool.
//
// A firing goes from one to the other and back: the mailbox starts the
// handler on the runner, and the runner reports the outcome to the
// mailbox. Each of those hand-offs used to wake a parked goroutine (two
// wake-ups per hop, on top of NATS's own, most of a pipeline hop's cost on
// a loaded machine). Now the goroutine that hands work over goes on with
// it when it has nothing else to do (handOff, claim): one goroutine
// carries a hop from its delivery through the handler to the outcome's
// publication, and a second one is woken only while the first is busy (the
// mailbox goes on taking deliveries while a handler runs).
type pinned struct {
	pool    *warmPool
	mu      sync.Mutex
	queue   []func() // queue[head:] waits
	head    int
	running bool
	stopped bool
	// inline: Schedule runs fn on the caller's goroutine (set by spawn
	// while protoactor starts the actor: its Started message needs no
	// goroutine of its own — 100,000 of them were a third of a large
	// session's start).
	inline bool
	// tail is work for another pinned that this one's goroutine takes on
	// once the function it runs returns, if nothing else waits here then
	// (handOff, claimed).
	tail tail
}

// tail is work handed to the pinned q by the goroutine of another: fn to
// run on q, or (fn nil) q itself, claimed (its running flag is held for
// this goroutine).
type tail struct {
	q   *pinned
	fn  func()
	age int // messages the mailbox processed since (ageTail)
}

// maxTailAge is how many more messages a mailbox processes before work it
// handed off goes to a goroutine of its own rather than waiting for the
// mailbox to run dry (a flood of deliveries must not hold up a handler).
const maxTailAge = 8

// lingerYields is how many times a goroutine of the pool whose queue ran
// dry yields the processor before it parks (warmPool.work).
const lingerYields = 2

// keptQueue is the capacity of a drained queue that is kept for the next
// burst (one allocation less per firing); a larger one is dropped, so an
// idle node holds no more than this.
const keptQueue = 4

// Schedule runs fn on the goroutine (actor.Dispatcher). After stop, fn is
// dropped.
func (p *pinned) Schedule(fn func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	if p.inline && !p.running {
		// Anything scheduled while fn runs waits in the queue for a
		// goroutine started as usual once fn returns.
		p.running = true
		p.mu.Unlock()
		fn()
		p.mu.Lock()
		if t := p.tail; t.q != nil {
			// Not this goroutine's to carry on with (it is the caller's).
			p.tail = tail{}
			p.mu.Unlock()
			t.start()
			p.mu.Lock()
		}
		p.running = false
		if p.head == len(p.queue) || p.stopped {
			return
		}
		p.running = true
		p.pool.run(p)
		return
	}
	p.queue = append(p.queue, fn)
	if !p.running {
		p.running = true
		p.pool.run(p)
	}
}

// handOff runs fn on q, from the goroutine running p (inside the function
// p runs): once that function returns, this goroutine runs q's work if
// nothing waits on p then; else fn is scheduled on q as usual. Until then
// fn waits (ageTail bounds how long).
func (p *pinned) handOff(q *pinned, fn func()) {
	p.mu.Lock()
	old := p.tail
	p.tail = tail{q: q, fn: fn}
	p.mu.Unlock()
	old.start()
}

// claim makes q's next work this goroutine's, from inside the function p
// runs: if q has no goroutine and nothing waiting, it is marked running
// (what is scheduled on it meanwhile waits in its queue, no goroutine is
// woken for it) and, once the function returns, this goroutine runs q
// (or, if p has work waiting then, q gets a goroutine of its own). It
// reports whether q was claimed.
func (p *pinned) claim(q *pinned) bool {
	if !q.claimIdle() {
		return false
	}
	p.mu.Lock()
	old := p.tail
	p.tail = tail{q: q}
	p.mu.Unlock()
	old.start()
	return true
}

// claimIdle marks p running when it has no goroutine and nothing waiting,
// for the caller to keep (nothing scheduled on p runs until it gives it
// back); it reports whether it did.
func (p *pinned) claimIdle() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running || p.stopped || p.head != len(p.queue) {
		return false
	}
	p.running = true
	return true
}

// ageTail counts one more message processed while p holds work handed
// off; past maxTailAge the work is scheduled on its own. It reports
// whether work handed off still waits.
func (p *pinned) ageTail() bool {
	p.mu.Lock()
	t := p.tail
	if t.q == nil {
		p.mu.Unlock()
		return false
	}
	if t.age++; t.age < maxTailAge {
		p.tail.age = t.age
		p.mu.Unlock()
		return true
	}
	p.tail = tail{}
	p.mu.Unlock()
	t.start()
	return false
}

// start gives the work of t a goroutine of its own (none when t is
// empty).
func (t tail) start() {
	switch {
	case t.q == nil:
	case t.fn != nil:
		t.q.Schedule(t.fn)
	default:
		t.q.mu.Lock()
		if (t.q.head == len(t.q.queue) && t.q.tail.q == nil) || t.q.stopped {
			t.q.running = false
			t.q.mu.Unlock()
			return
		}
		t.q.mu.Unlock()
		t.q.pool.run(t.q)
	}
}

// take makes t's work this goroutine's next: it returns q, running, with
// the work in its queue; nil when q already has a goroutine (the work
// then waits there) or was stopped.
func (t tail) take() *pinned {
	q := t.q
	if t.fn == nil {
		return q // claimed: running is ours
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stopped {
		return nil
	}
	q.queue = append(q.queue, t.fn)
	if q.running {
		return nil
	}
	q.running = true
	return q
}

// loop runs what p holds until it holds nothing. It returns the pinned whose work this goroutine takes on
// next (handOff, claim), nil when none.
func (p *pinned) loop() *pinned {
	for {
		p.mu.Lock()
		if t := p.tail; t.q != nil {
			p.tail = tail{}
			if p.head == len(p.queue) && !p.stopped {
				// Nothing else waits here: this goroutine goes on with
				// the work handed off, and p gets another goroutine when
				// work arrives.
				p.running = false
				p.shrink()
				p.mu.Unlock()
				return t.take()
			}
			p.mu.Unlock()
			t.start()
			continue
		}
		if p.head == len(p.queue) || p.stopped {
			p.running = false
			p.shrink()
			p.mu.Unlock()
			return nil
		}
		fn := p.queue[p.head]
		p.queue[p.head] = nil
		p.head++
		if p.head >= 64 && p.head*2 >= len(p.queue) {
			// Busy without a pause: what waits moves to the front, so the
			// queue does not grow with everything ever run.
			n := copy(p.queue, p.queue[p.head:])
			clear(p.queue[n:])
			p.queue, p.head = p.queue[:n], 0
		}
		p.mu.Unlock()
		fn()
	}
}

// shrink empties p's queue once it has run dry (p.mu held), keeping a
// small array for the next burst.
func (p *pinned) shrink() {
	if cap(p.queue) > keptQueue || p.stopped {
		p.queue = nil
	} else {
		clear(p.queue[:cap(p.queue)])
		p.queue = p.queue[:0]
	}
	p.head = 0
}

// Throughput is how many messages a mailbox processes before yielding
// (actor.Dispatcher).
func (p *pinned) Throughput() int { return 300 }

// setInline makes Schedule run on its caller's goroutine (on) or on the
// pinned goroutine again (off).
func (p *pinned) setInline(on bool) {
	p.mu.Lock()
	p.inline = on
	p.mu.Unlock()
}

// stop drops what was not started; the function running returns first.
func (p *pinned) stop() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
}

// warmPool keeps a few goroutines that ran a pinned queue, with the stacks
// they grew, for the next queue that gets work. A chain of nodes hands
// each firing to a queue that was idle: starting a goroutine for it, and
// growing its stack again through the handler's frames, cost about a
// tenth of the CPU of a hop. At most warmIdle wait (a session of idle
// nodes still costs no goroutine per node); they end when the System
// stops (close), and wg tracks every goroutine of the pool that runs or
// may run a queue: close counts the waiting ones out as it tells them to
// end, since they hold nothing of the System and touch nothing of it
// after (waking each and waiting for it was about 40 µs of every Stop, a
// tenth of a 10-node pipeline's fixed cost).
type warmPool struct {
	wg     *sync.WaitGroup
	mu     sync.Mutex
	idle   []chan *pinned // a waiting goroutine's next queue
	closed bool
	// carrier, while set (carry), takes the next queue that needs a
	// goroutine as its tail: the goroutine running the carrier runs that
	// queue once the carrier's function returns (and nothing else waits
	// on the carrier), instead of a goroutine of the pool. A node's io
	// goroutine handing a firing's output to the next node's actor goes on
	// with that actor's mailbox: a pipeline's hop wakes no goroutine there.
	carrier *pinned
	// spawn, when set, starts the pool's goroutines (System.goroutine: on
	// goroutines kept with their stacks, Config.Go); nil starts new ones.
	spawn func(func())
}

// carry makes c the carrier, from the goroutine running c (inside the
// function c runs), until uncarry: c's goroutine then looks at its tail
// after the carrier was taken, as the carrier is only ever set and taken
// while that function runs. Another goroutine's carrier set meanwhile
// replaces it (carrying is a placement, never needed for progress).
func (w *warmPool) carry(c *pinned) {
	w.mu.Lock()
	w.carrier = c
	w.mu.Unlock()
}

// uncarry ends c's carrying, before the function c runs returns.
func (w *warmPool) uncarry(c *pinned) {
	w.mu.Lock()
	if w.carrier == c {
		w.carrier = nil
	}
	w.mu.Unlock()
}

// warmIdle is how many goroutines of a pool may wait for work.
const warmIdle = 8

// run gives p, which has work and no goroutine, one.
func (w *warmPool) run(p *pinned) {
	w.mu.Lock()
	if c := w.carrier; c != nil && c != p {
		// Taken under w.mu, and the tail set before it is released: the
		// carrier's function, which clears the carrier under w.mu before
		// it returns, has not returned yet, so its goroutine takes p.
		w.carrier = nil
		c.mu.Lock()
		old := c.tail
		c.tail = tail{q: p} // claimed: p.running is held for c's goroutine
		c.mu.Unlock()
		w.mu.Unlock()
		old.start()
		return
	}
	if n := len(w.idle); n > 0 {
		c := w.idle[n-1]
		w.idle = w.idle[:n-1]
		w.mu.Unlock()
		c <- p // buffered: the goroutine takes it when it is ready
		return
	}
	w.wg.Add(1)
	w.mu.Unlock()
	if w.spawn != nil {
		w.spawn(func() { w.work(p) })
		return
	}
	go w.work(p)
}

// work runs queues until the pool has enough waiting or is closed.
func (w *warmPool) work(p *pinned) {
	// out: close counted this goroutine out of wg (it waited in the pool
	// when the pool closed).
	out := false
	defer func() {
		if !out {
			w.wg.Done()
		}
	}()
	var next chan *pinned
	for p != nil {
		if next := p.loop(); next != nil {
			p = next // work handed off to this goroutine
			continue
		}
		w.mu.Lock()
		if w.closed || len(w.idle) >= warmIdle {
			w.mu.Unlock()
			return
		}
		if next == nil {
			next = make(chan *pinned, 1)
		}
		w.idle = append(w.idle, next)
		w.mu.Unlock()
		// Work often comes right behind (the next envelope of a burst, the
		// next node's delivery): the goroutine, already in the pool,
		// yields a few times before it parks, so whoever sends work takes
		// it without waking anyone. (It used to linger holding its own
		// queue only: work for any other queue meanwhile started a new
		// goroutine — 0.65 per hop of a pipeline, each growing its stack
		// from the start — while the lingering ones then overflowed the
		// pool and ended.)
		p = nil
		for i := 0; i < lingerYields && p == nil; i++ {
			runtime.Gosched()
			select {
			case q, ok := <-next:
				if !ok {
					out = true // the pool closed
					return
				}
				p = q
			default:
			}
		}
		if p == nil {
			// With its stack kept: woken with it shrunk, a goroutine of
			// the pool grew it again, copying it, through the frames of
			// the next firing — 9% of a pipeline's CPU.
			p = warm.Receive(next)
			out = p == nil // the pool closed
		}
	}
}

// close ends the goroutines that wait; the ones running end when their
// queue is done (stop the queues first).
func (w *warmPool) close() {
	w.mu.Lock()
	w.closed = true
	idle := w.idle
	w.idle = nil
	w.mu.Unlock()
	for _, c := range idle {
		close(c)
		w.wg.Done() // its goroutine ends by itself, touching nothing of the System (work)
	}
}
