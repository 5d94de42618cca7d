package actors

import (
	"runtime"
	"sync"
)

// pinned runs the functions handed to it one at a time, in order, on a
// goroutine it starts when work arrives and that ends when none is left.
// A node actor has two: one runs its mailbox (a protoactor Dispatcher) and
// one runs its handler and the I/O of its firings (a node runs one at a
// time). An idle node has no goroutine of its own: a session of 100,000
// nodes that wait costs no stacks; a busy one keeps its goroutine (and the
// stack it grew) for as long as work keeps coming.
//
// A node actor holds its two by value; spawn sets wg, which tracks the
// goroutine while it runs.
type pinned struct {
	wg      *sync.WaitGroup
	mu      sync.Mutex
	queue   []func() // queue[head:] waits
	head    int
	running bool
	stopped bool
}

// lingerYields is how many times a pinned goroutine whose queue ran dry
// yields the processor before it ends.
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
	p.queue = append(p.queue, fn)
	if !p.running {
		p.running = true
		p.wg.Add(1)
		go p.loop()
	}
}

func (p *pinned) loop() {
	defer p.wg.Done()
	idle := 0
	for {
		p.mu.Lock()
		if p.head == len(p.queue) && !p.stopped && idle < lingerYields {
			// Work often comes right behind (the next envelope of a burst):
			// yield to whoever sends it rather than end the goroutine, whose
			// successor would grow its stack again from the start (stack
			// growth was a sixth of a reactive node's ingest).
			p.mu.Unlock()
			idle++
			runtime.Gosched()
			continue
		}
		if p.head == len(p.queue) || p.stopped {
			p.running = false
			if cap(p.queue) > keptQueue || p.stopped {
				p.queue = nil
			} else {
				clear(p.queue[:cap(p.queue)])
				p.queue = p.queue[:0]
			}
			p.head = 0
			p.mu.Unlock()
			return
		}
		idle = 0
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

// Throughput is how many messages a mailbox processes before yielding
// (actor.Dispatcher).
func (p *pinned) Throughput() int { return 300 }

// stop drops what was not started; the function running returns first.
func (p *pinned) stop() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
}
