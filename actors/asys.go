package actors

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// A protoactor actor system costs about 3,000 allocations to make (its
// process registry: 1,024 concurrent maps, shards.go) — half the
// allocations and a tenth of the CPU of a 10-node pipeline's Run. A
// stopped System whose actors are all gone from the registry hands its
// actor system to the next System instead of shutting it down: a few are
// kept (asysKeep), at about 124 KB each. What stays behind in it is
// nothing of the old session's: its actors are removed from the registry
// (a system whose registry may still hold more than its own processes —
// a future the System waited on when it stopped — is shut down instead),
// and the next System names its actors with the
// system's generation, so a late message to an old session's actor finds
// no actor of the new one by name. protoactor's own log lines (dead
// letters) go to the logger of the System that holds the actor system
// (swapHandler): a dead letter to an old session's actor that arrives
// after its actor system was taken again is logged by the new one's.
const asysKeep = 4

type asys struct {
	as   *actor.ActorSystem
	log  *swapHandler
	gen  uint64 // how many Systems used it before this one
	base int    // the registry's processes of its own (event stream, ...)
	// futures counts the futures a System waits on (await): registered
	// in the process registry until they complete. With none and every
	// actor the System spawned removed, the registry holds its own
	// processes only — counting them (1,024 maps of 32 locked shards each)
	// was 3% of the CPU of a 10-node pipeline's Run.
	futures atomic.Int32
	// evq is the event queue of the System that used it last, drained (nil
	// when it has none): a System's queue of 8,192 events is 64 KB to make
	// and clear, a fifth of what a 10-node pipeline's Run allocated.
	evq chan *pb.Event
}

// eventQueue is the event queue for a System: the last one's, or a new one.
func (a *asys) eventQueue() chan *pb.Event {
	q := a.evq
	a.evq = nil
	if q == nil {
		q = make(chan *pb.Event, eventQueueLen)
	}
	return q
}

// eventQueueLen is how many events a System's queue holds before Emit
// blocks.
const eventQueueLen = 8192

var asysFree struct {
	mu   sync.Mutex
	free []*asys
}

// takeActorSystem is an actor system for a System logging to logger: a
// kept one, or a new one.
func takeActorSystem(logger *slog.Logger) *asys {
	asysFree.mu.Lock()
	var a *asys
	if n := len(asysFree.free); n > 0 {
		a = asysFree.free[n-1]
		asysFree.free[n-1] = nil
		asysFree.free = asysFree.free[:n-1]
	}
	asysFree.mu.Unlock()
	if a != nil {
		a.gen++
		a.log.set(logger.Handler())
		return a
	}
	a = &asys{log: &swapHandler{}}
	a.log.set(logger.Handler())
	// A message that reaches a stopped actor (a node's last report while
	// Stop poisons it) starts protoactor's dead-letter log throttle, a
	// goroutine that lives for the throttle's interval after the system
	// stopped; a short interval bounds that.
	a.as = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(a.log) }),
		actor.WithDeadLetterThrottleInterval(50*time.Millisecond))
	a.base = registered(a.as)
	return a
}

// name is the registry name of a node's actor in this actor system.
func (a *asys) name(node string) string {
	if a.gen == 0 {
		return "node-" + node
	}
	return "node-" + node + "$" + strconv.FormatUint(a.gen, 10)
}

// await waits for the future f makes (a request to an actor, its stop),
// counted while it may be registered: a future removes itself from the
// registry before its Result returns.
func (a *asys) await(f func() *actor.Future) (any, error) {
	a.futures.Add(1)
	defer a.futures.Add(-1)
	return f().Result()
}

// release ends a System's use of its actor system: its actors (every pid
// it spawned) are removed from the registry and the system is kept for
// the next System, or shut down when enough are kept or something of the
// old System may still be registered (a future it waits on). A System
// registers nothing else (TestStoppedSystemLeavesItsActorSystemClean).
func (a *asys) release(spawned []*actor.PID) {
	for _, p := range spawned {
		a.as.ProcessRegistry.Remove(p)
	}
	a.log.set(slog.DiscardHandler)
	if a.futures.Load() == 0 {
		asysFree.mu.Lock()
		if len(asysFree.free) < asysKeep {
			asysFree.free = append(asysFree.free, a)
			asysFree.mu.Unlock()
			return
		}
		asysFree.mu.Unlock()
	}
	a.as.Shutdown()
}

// registered counts the processes in an actor system's registry (tests).
func registered(as *actor.ActorSystem) int {
	n := 0
	for _, m := range as.ProcessRegistry.LocalPIDs.LocalPIDs {
		n += m.Count()
	}
	return n
}

// swapHandler is an actor system's log handler: the handler of the System
// that holds it.
type swapHandler struct {
	h atomic.Pointer[slog.Handler]
}

func (s *swapHandler) set(h slog.Handler) { s.h.Store(&h) }

func (s *swapHandler) cur() slog.Handler { return *s.h.Load() }

func (s *swapHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return s.cur().Enabled(ctx, l)
}

func (s *swapHandler) Handle(ctx context.Context, r slog.Record) error {
	return s.cur().Handle(ctx, r)
}

func (s *swapHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &derivedHandler{s: s, with: func(h slog.Handler) slog.Handler { return h.WithAttrs(attrs) }}
}

func (s *swapHandler) WithGroup(name string) slog.Handler {
	return &derivedHandler{s: s, with: func(h slog.Handler) slog.Handler { return h.WithGroup(name) }}
}

// derivedHandler is a swapHandler with attributes or a group: applied to
// the current handler at each record.
type derivedHandler struct {
	s    *swapHandler
	with func(slog.Handler) slog.Handler
}

func (d *derivedHandler) cur() slog.Handler { return d.with(d.s.cur()) }

func (d *derivedHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return d.cur().Enabled(ctx, l)
}

func (d *derivedHandler) Handle(ctx context.Context, r slog.Record) error {
	return d.cur().Handle(ctx, r)
}

func (d *derivedHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	prev := d.with
	return &derivedHandler{s: d.s, with: func(h slog.Handler) slog.Handler { return prev(h).WithAttrs(attrs) }}
}

func (d *derivedHandler) WithGroup(name string) slog.Handler {
	prev := d.with
	return &derivedHandler{s: d.s, with: func(h slog.Handler) slog.Handler { return prev(h).WithGroup(name) }}
}
