package actors

import "sync"

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
	queue   []func()
	running bool
	stopped bool
}

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
	for {
		p.mu.Lock()
		if len(p.queue) == 0 || p.stopped {
			p.running = false
			p.queue = nil
			p.mu.Unlock()
			return
		}
		fn := p.queue[0]
		p.queue[0] = nil
		p.queue = p.queue[1:]
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
