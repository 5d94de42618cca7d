package session

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/internal/crash"
)

// Prepared stores. Making a new durable session's store — its lease, its
// bucket with the owner's mark and the signing key, its work stream and the
// stream's consumer — is a dozen round trips and the server's mkdir and
// file creation: about 3 ms, more than half of a 10-node durable pipeline's
// Run, and removing a successful one's is another 0.5 ms. A process that
// starts durable pipelines one after another (a service running one per
// request, a batch, a loop over inputs) pays both on every Run's critical
// path. So a broker that saw two durable pipeline starts within
// preparedBurst of each other has the stores of the next ones
// (preparedAhead) made ahead, in the background, each time such a start
// takes one made for it:
//
//   - under a fresh id (NewID), the id of the start that takes it: only a
//     start whose id is generated may (Config.ID empty), with the real
//     clock, the default lease TTL and the same replicas;
//   - leased by this process, and renewed while it waits, like a session's
//     lease: no other process takes it, and `gc` (RemoveUnrecorded) leaves
//     it alone while this process lives;
//   - without a work stream (actors.Config.MakeStream): a pipeline's input
//     and hops are handed in process, so the stream would hold outside
//     input only, and making and removing one is a third of the CPU of a
//     10-node Run. Outside input reaches the session through its intake
//     while this process serves it; the first envelope the intake accepts
//     makes the stream (storing the session's Stored subjects) and its
//     consumer. A session left unfinished has it made listing its inbound
//     subjects when its process lets go of it (Stop; a resume makes it at
//     its start), so outside input is stored while nobody serves it. A
//     process killed meanwhile leaves publishers "no responders" until the
//     session is resumed: nothing acknowledged is lost. Running finds such
//     a session by its bucket.
//
// The store of a successful session that took a prepared one is removed
// in the background as well (cleanup). The broker's Close waits for those
// removals and removes a store prepared and never taken. A process killed
// with one prepared leaves a store no session recorded (no session.meta):
// no listing shows it; `gc` removes it once its lease expired, and so does
// a resume of its id.
//
// A single start (the CLI's `run`) prepares nothing.

// preparedBurst is how close two durable pipeline starts of a broker must
// be for it to prepare the next one's store.
var preparedBurst = 2 * time.Second

// preparedAhead is how many stores a broker has made ahead in a burst.
// Making one (lease, bucket, owner's mark, key) takes about as long as a
// 10-node durable Run (2-3 ms here): with one made ahead, a start waited
// for the store begun at the last one's start half of the time (0.5 ms on
// average); with two, each has about two Runs' time to be made.
const preparedAhead = 2

// preparedStore is a store made ahead for the next durable pipeline start.
type preparedStore struct {
	p        *preparer
	id       string
	replicas int
	ready    chan struct{} // closed when made (or failed)
	lease    *lease
	err      error
	// The lease's renewal while the store waits (renew), told to end by
	// stop. A start that takes the store marks it taken under mu and goes
	// on without waiting for that goroutine to be scheduled and end: mu is
	// held through each renewal, so none runs once it is taken.
	stop  chan struct{}
	mu    sync.Mutex
	taken bool // a start took the store, or it is discarded: no renewal
	lost  bool // the renewal found the lease taken
}

// preparer makes the prepared stores of one broker.
type preparer struct {
	b *broker.Broker
	// bg is the broker the preparations and removals go through: b's
	// sibling (broker.Sibling), made at the first preparation, so that the
	// server reads their requests beside the journal writes of the
	// sessions on b's connection, not among them; b when it could not be
	// made. Closed by close, after every preparation and removal.
	bg *broker.Broker

	// The shared bucket (broker.SharedName) the stores are made in, with
	// its stream and replicas, by the broker whose connection opened it:
	// the background's (preparations) and the sessions' (sharedFor) (smu).
	smu    sync.Mutex
	shared map[*broker.Broker]*sharedHandle

	mu     sync.Mutex
	next   []*preparedStore // made or being made, the next to take first
	last   time.Time        // when the last durable pipeline start asked
	closed bool
	wg     sync.WaitGroup // preparations and background removals
	// removing holds the ids whose stores are being removed in the
	// background (removeLater), each with a channel closed when done.
	removing map[string]chan struct{}
	hold     chan struct{} // removals wait for it to close (a test's HoldRemovals)
}

// preparers holds each broker's preparer (*broker.Broker → *preparer),
// dropped at the broker's Close.
var preparers sync.Map

// preparerOf is b's preparer, made and registered with b's Close on first
// use; nil once b is closing.
func preparerOf(b *broker.Broker) *preparer {
	return ofBroker(&preparers, b, func() *preparer { return &preparer{b: b} }, (*preparer).close)
}

// ofBroker is b's value in m (*broker.Broker → *T): made on first use and
// registered with b's Close, which runs closeFn and drops it; nil once b is
// closing.
func ofBroker[T any](m *sync.Map, b *broker.Broker, newT func() *T, closeFn func(*T)) *T {
	if v, ok := m.Load(b); ok {
		return v.(*T)
	}
	v := newT()
	if actual, loaded := m.LoadOrStore(b, v); loaded {
		return actual.(*T)
	}
	if !b.OnClose(func() { closeFn(v); m.Delete(b) }) {
		m.Delete(b)
		return nil
	}
	return v
}

// preparable says whether a start of cfg may take a prepared store: a new
// durable pipeline (not a long-lived reactive session, whose start cost
// does not matter, nor a fork) with a generated id, the real clock and the
// default lease. Resumes never ask.
func preparable(cfg *Config) bool {
	return cfg.Durable && cfg.ForkOf == "" && cfg.ID == "" && cfg.Clock == nil &&
		cfg.LeaseTTL == 0 && cfg.Graph != nil && cfg.Graph.Kind() != "session" && cfg.Broker != nil &&
		cfg.Broker.JetStream() != nil
}

// take returns the store prepared for a start of cfg, waiting for it if
// it is being made, or nil (the start makes its own); and, when starts
// come in a burst, starts making the next ones until preparedAhead are. A store taken has its lease
// held and no longer renewed here: the session renews it.
func (p *preparer) take(cfg *Config) *preparedStore {
	n := cfg.replicas()
	now := time.Now()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	var got *preparedStore
	if len(p.next) > 0 {
		got = p.next[0]
		p.next = p.next[1:]
	}
	burst := !p.last.IsZero() && now.Sub(p.last) < preparedBurst
	p.last = now
	if got != nil || burst {
		for len(p.next) < preparedAhead {
			p.next = append(p.next, p.prepareLocked(n))
		}
	}
	p.mu.Unlock()
	if got == nil {
		return nil
	}
	<-got.ready
	if got.err == nil && got.replicas == n {
		if !got.end() {
			return got
		}
		got.err = ErrLeaseLost
	}
	p.discard(got)
	return nil
}

// backgroundLocked is p.bg, made on first use (p.mu held).
func (p *preparer) backgroundLocked() *broker.Broker {
	if p.bg == nil {
		bg, err := p.b.Sibling()
		if err != nil {
			bg = p.b
		}
		p.bg = bg
	}
	return p.bg
}

// prepareLocked starts making a store with n replicas (p.mu held).
func (p *preparer) prepareLocked(n int) *preparedStore {
	ps := &preparedStore{p: p, id: NewID(), replicas: n, ready: make(chan struct{}),
		stop: make(chan struct{})}
	bg := p.backgroundLocked()
	p.wg.Add(1)
	p.spawn(func() { // owned by p: close waits for it
		defer p.wg.Done()
		defer close(ps.ready)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		l, err := p.claimStore(ctx, bg, ps.id, n)
		if err != nil {
			ps.err = err
			if l != nil {
				p.remove(ps.id, l)
			}
			return
		}
		ps.lease = l
		crash.Point("store-prepared") // made and leased; no start has it yet
		p.wg.Add(1)
		go ps.renew() // owned by p (close waits for it); take or discard ends it
	})
	return ps
}

// spawn runs f, which p.wg counts, on a goroutine of the broker's that
// keeps its stack (goroutinesOf), or on a new one: the preparations and
// removals go through encoding/json, which grew a new goroutine's stack
// each time.
func (p *preparer) spawn(f func()) {
	if g := goroutinesOf(p.b); g == nil || !g.Go(f) {
		go f()
	}
}

// claimStore makes and leases on b the store of id, an id NewID made,
// with n replicas: in the shared bucket when it has n replicas. Its
// error is errIDTaken when the store held a session under that id.
func (p *preparer) claimStore(ctx context.Context, b *broker.Broker, id string, n int) (*lease, error) {
	cfg := Config{ID: id, Broker: b, Durable: true, Clock: clock.Real(), Replicas: n,
		Logger: slog.New(slog.DiscardHandler), generated: true}
	// Generated: no lookup of the id in the store first (two requests a
	// store); a session the store holds under it is met by the id key
	// (idKey) or, in a bucket of its own, by its bucket's creation.
	opts := []broker.Option{broker.Fresh(), broker.Generated()}
	if kv := p.sharedKV(ctx, b, n); kv != nil {
		opts = append(opts, broker.InShared(kv))
	}
	l, err := claimThen(ctx, &cfg, true, nil, opts...)
	if err == nil && !l.made {
		// Its own bucket, which another session made: not ours to remove.
		l.release()
		return nil, errIDTaken
	}
	return l, err
}

// sharedKV is the shared bucket, when it has n replicas, through b's
// connection: opened, or made with n, by the first call for b. nil
// otherwise, and when it could not be opened: the store is then made with
// a bucket of its own.
func (p *preparer) sharedKV(ctx context.Context, b *broker.Broker, n int) jetstream.KeyValue {
	p.smu.Lock()
	defer p.smu.Unlock()
	h := p.shared[b]
	if h == nil {
		kv, err := broker.SharedKV(ctx, b.JetStream(), b.Storage(), n)
		if err != nil {
			return nil
		}
		s, err := b.JetStream().Stream(ctx, "KV_"+broker.SharedName)
		if err != nil {
			return nil
		}
		h = &sharedHandle{kv: kv, stream: s, n: s.CachedInfo().Config.Replicas}
		if p.shared == nil {
			p.shared = map[*broker.Broker]*sharedHandle{}
		}
		p.shared[b] = h
	}
	if h.n != n {
		return nil
	}
	return h.kv
}

// sharedHandle is the shared bucket and its stream, opened through one
// connection, and the bucket's replicas.
type sharedHandle struct {
	kv     jetstream.KeyValue
	stream jetstream.Stream
	n      int
}

// sharedFor is the shared bucket for a new durable pipeline started under
// an id of its caller's (which no prepared store can have), when the
// bucket has the session's replicas: its keys go there as a prepared
// store's do, and its start makes no stream of its own (a directory, files
// and their metadata on the server, and as much again to remove it). nil
// otherwise: the session makes a bucket of its own. It is opened through
// the session's own connection: a process that runs one pipeline does not
// make the preparer's second connection for it (made and closed, it cost a
// CLI run about 9 ms).
//
// A generated id without a prepared store (a process's first pipeline, a
// start that is no burst) keeps a bucket of its own: measured on `switchyard
// run`, a process that runs one pipeline and exits, the shared bucket cost
// 2-3 ms more (the server writes the shared stream's state at its
// shutdown, where the session's own bucket was deleted).
func sharedFor(cfg *Config) (*preparer, jetstream.KeyValue) {
	if !cfg.late || cfg.prepared != nil || cfg.generated || cfg.Broker.JetStream() == nil {
		return nil, nil
	}
	p := preparerOf(cfg.Broker)
	if p == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if kv := p.sharedKV(ctx, cfg.Broker, cfg.replicas()); kv != nil {
		return p, kv
	}
	return nil, nil
}

// renew renews the prepared store's lease every third of its TTL until
// the store is taken or discarded (end), or the lease is found taken.
func (ps *preparedStore) renew() {
	defer ps.p.wg.Done()
	tick := time.NewTicker(ps.lease.ttl / 3)
	defer tick.Stop()
	for {
		select {
		case <-ps.stop:
			return
		case <-tick.C:
		}
		ps.mu.Lock()
		if ps.taken {
			ps.mu.Unlock()
			return
		}
		if err := ps.lease.renewOnce(); errors.Is(err, ErrLeaseLost) {
			ps.lost = true
			ps.mu.Unlock()
			return
		}
		ps.mu.Unlock()
	}
}

// end stops the renewal of a store made (a start takes it, or it is
// discarded) and reports whether its lease was found taken meanwhile. No
// renewal runs once it returns; the renewal's goroutine ends by itself.
func (ps *preparedStore) end() (lost bool) {
	ps.mu.Lock()
	first := !ps.taken
	ps.taken = true
	lost = ps.lost
	ps.mu.Unlock()
	if first {
		close(ps.stop)
	}
	return lost
}

// discard removes a prepared store that no start takes (in the
// background; close waits for it).
func (p *preparer) discard(ps *preparedStore) {
	<-ps.ready
	if ps.lease == nil {
		return // failed: removed when it failed
	}
	if ps.end() {
		return // another process took its id: its to remove
	}
	if !p.removeLater(ps.id, func() { p.remove(ps.id, ps.lease) }) {
		p.remove(ps.id, ps.lease) // closing: removed now
	}
}

// remove deletes the store of a session id that nothing recorded, and its
// lease l.
func (p *preparer) remove(id string, l *lease) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts := []broker.DeleteOption{broker.NotArchived(), broker.NoDeadLetters(), broker.LeaseLeft()}
	if l.bucket != nil && l.bucket.Shared() {
		opts = append(opts, broker.SharedBucketOnly(p.bgStream()))
	}
	_ = broker.DeleteSession(ctx, p.js(), id, opts...)
	l.purge = true
	l.release() // after: held while its store goes
}

// bgStream is the shared bucket's stream through the connection
// removals go through (js), when it was opened.
func (p *preparer) bgStream() jetstream.Stream {
	p.mu.Lock()
	bg := p.bg
	p.mu.Unlock()
	if bg == nil {
		bg = p.b
	}
	return p.stream(bg)
}

// stream is the shared bucket's stream through b's connection, when it
// was opened (sharedKV); nil otherwise.
func (p *preparer) stream(b *broker.Broker) jetstream.Stream {
	p.smu.Lock()
	defer p.smu.Unlock()
	if h := p.shared[b]; h != nil {
		return h.stream
	}
	return nil
}

// js is the JetStream context removals go through: bg's once made.
func (p *preparer) js() jetstream.JetStream {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bg != nil {
		return p.bg.JetStream()
	}
	return p.b.JetStream()
}

// removeLater runs a successful session's removal in the background;
// false when the broker is closing (the caller removes it itself).
func (p *preparer) removeLater(id string, f func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	done := make(chan struct{})
	if p.removing == nil {
		p.removing = map[string]chan struct{}{}
	}
	p.removing[id] = done // ids are leased: one removal of an id at a time
	hold := p.hold
	p.wg.Add(1)
	p.spawn(func() { // owned by p: close waits for it
		defer p.wg.Done()
		defer func() {
			p.mu.Lock()
			delete(p.removing, id)
			p.mu.Unlock()
			close(done)
		}()
		if hold != nil {
			<-hold
		}
		f()
	})
	return true
}

// removalWait is called when a claim waits for a removal (a test's
// OnRemovalWait).
var removalWait atomic.Pointer[func(id string)]

// awaitRemoval waits until no store of the ids given is being removed in
// the background by b's preparer (removeLater), or ctx ends: a claim of
// an id that a session of this process just ended under. It makes no
// preparer.
func awaitRemoval(ctx context.Context, b *broker.Broker, ids ...string) error {
	v, ok := preparers.Load(b)
	if !ok {
		return nil
	}
	p := v.(*preparer)
	for _, id := range ids {
		if id == "" {
			continue
		}
		p.mu.Lock()
		done := p.removing[id]
		p.mu.Unlock()
		if done == nil {
			continue
		}
		if f := removalWait.Load(); f != nil && *f != nil {
			(*f)(id)
		}
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// close removes the store prepared and not taken and waits for every
// preparation and removal under way: the broker is closing.
func (p *preparer) close() {
	p.mu.Lock()
	p.closed = true
	next := p.next
	p.next = nil
	p.mu.Unlock()
	for _, ps := range next {
		p.discard(ps) // closed: removed here
	}
	p.wg.Wait()
	p.mu.Lock()
	bg := p.bg
	p.mu.Unlock()
	if bg != nil && bg != p.b {
		_ = bg.Close()
	}
}
