package actors

import "sync"

// pinned is one goroutine that lives as long as its owner and runs the
// functions handed to it, one at a time. A node actor has two: one runs
// its mailbox (a protoactor Dispatcher: the default one starts a new
// goroutine for every burst of messages, whose stack then has to grow
// again on every hop) and one runs its handler (a node runs one handler at
// a time). Handing work to a parked goroutine is a channel send.
type pinned struct {
	work chan func()
	quit chan struct{}
	once sync.Once
}

// newPinned starts the goroutine; wg tracks it until stop.
func newPinned(wg *sync.WaitGroup) *pinned {
	p := &pinned{work: make(chan func(), 1), quit: make(chan struct{})}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case fn := <-p.work:
				fn()
			case <-p.quit:
				return
			}
		}
	}()
	return p
}

// Schedule runs fn on the goroutine (actor.Dispatcher). After stop, fn is
// dropped.
func (p *pinned) Schedule(fn func()) {
	select {
	case p.work <- fn:
	case <-p.quit:
	}
}

// Throughput is how many messages a mailbox processes before yielding
// (actor.Dispatcher).
func (p *pinned) Throughput() int { return 300 }

// stop ends the goroutine after the function it runs returns.
func (p *pinned) stop() { p.once.Do(func() { close(p.quit) }) }
