package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/pool"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/scheduler"
)

// ErrStopped is returned by calls on a stopped System.
var ErrStopped = errors.New("actors: system stopped")

// Config is what a System needs to run a graph.
type Config struct {
	SessionID string
	Graph     *graph.Graph
	Conn      *nats.Conn
	// Middleware wraps every node's handler, the first outermost.
	Middleware []nodes.Middleware
	// Threads seeds the session's agent threads (nodes.ThreadKeyPrefix
	// keys), e.g. from the checkpoint resumed from.
	Threads map[string]string
	// JetStream, when set, makes every envelope publication a JetStream
	// publish acknowledged by the server (durable), with the envelope id as
	// the de-duplication id. Nil publishes on core NATS.
	JetStream jetstream.JetStream
	// Consume makes the session durable (needs JetStream): the nodes read
	// their subjects through the session's durable JetStream consumer (one
	// for every node) and acknowledge an
	// envelope only after the firing that consumed it is committed and its
	// output published. Consumed seeds the ids of envelopes consumed before
	// a restart (from the checkpoint), so redeliveries are recognised.
	Consume  bool
	Consumed []string
	// Floors holds, after a restart, each node's acknowledgement floor as
	// the journal last recorded it: the session's consumer starts after
	// the lowest, and what lies at or below a node's own floor is not
	// delivered to it again. What
	// the server remembers of acknowledgements is not trusted: the
	// embedded server dies with the process and may not have written the
	// last ones.
	Floors map[string]uint64
	// Storage is where the session's artifacts are stored (durable).
	Storage broker.Storage
	// NoConsumer says the session's work stream has no consumer yet (it
	// was just made): the session's consumer is created without first
	// deleting one (a round trip).
	NoConsumer bool
	// Consumer, when not nil, is the session's consumer the caller made
	// on the work stream it just made (NewConsumer): New makes none.
	Consumer jetstream.Consumer
	// MakeStream, when not nil, says the session's work stream is not
	// made yet (a new durable pipeline, whose input and hops are handed in
	// process and need no stream): the session starts in ingress mode (its
	// outside input goes through its intake) without a consumer, and the first
	// outside envelope its intake takes, or ListInbound, makes the stream
	// by calling MakeStream with the subjects it is to store
	// (broker.Ingress, or broker.Inbound of the graph's inbound subjects),
	// then its consumer (lazy.go).
	MakeStream func(ctx context.Context, subjects broker.Option) error
	// StreamSubjects, when not nil, are the subjects the session's work
	// stream has (the session just made it, or found it, under its lease):
	// when they are what the graph needs, New sets nothing on the stream
	// (narrowStream would look them up, twice).
	StreamSubjects []string
	// ConsumerMemory keeps the state of the session's consumer in the
	// server's memory instead of its store: for an embedded server, which
	// dies with the process — and every start re-creates the consumer from
	// the journal's floors, never trusting what the server remembers — a
	// file-backed consumer costs the server a directory and files to make
	// and remove at every start and end of a session, for nothing.
	ConsumerMemory bool
	// MaxHeld bounds the deliveries the session's nodes hold
	// unacknowledged (its consumer's MaxAckPending; 0:
	// broker.DefaultMaxHeld): the stream delivers nothing more while
	// that many are held. The session says so with a session.held_full
	// event when the count reaches it.
	MaxHeld int
	// DeadLetters, when set, makes the store of the session's dead letters
	// (broker.EnsureDeadLetters); it is called before the first one is
	// published, and again before the next while it fails.
	DeadLetters func(ctx context.Context) error
	// Storing, when set, is told on the handler's goroutine, before a
	// firing stores its first artifact, the node and firing number whose
	// commit will refer to it: the session's artifact retention leaves the
	// firing's objects alone until its journal record is numbered.
	Storing  func(node string, firing uint64)
	Registry *nodes.Registry
	// Work sends the firings of nodes with a pool attribute (or
	// type="remote") to worker processes; nil refuses such nodes.
	Work    *pool.Dispatcher
	Journal Journal
	// Contexts gives the whole run context of an envelope published and
	// not consumed yet, from the journal: an envelope carries its context
	// as a delta over its base, which the process that sent it holds; a
	// resumed session's receiver finds it here (context.go). Nil refuses
	// such envelopes when their base is not in process.
	Contexts ContextSource
	// WholeContexts makes every envelope carry its whole context, not a
	// delta: for a journal that may lose a firing's record after the
	// firing's envelopes left (a sparse checkpoint policy, whose crash
	// loses the records it held), since a delta over a base the journal
	// lost cannot be resolved after a restart.
	WholeContexts bool
	// BusHops: a session that is not durable publishes its outputs for
	// its own nodes on core NATS, as before handLocal, where clients
	// subscribed to the session's edges see them (session.Config.BusHops).
	BusHops bool
	// OnTerminal is called after a token's path ends and every envelope and
	// event of that firing has been published.
	OnTerminal func(node string, t *Terminal)
	LogsDir    string
	WorkDir    string
	Clock      clock.Clock
	// Backoff, when set, returns the delay before retry n (n >= 1) for every
	// node (tests). Nil uses each node's retry_policy preset (default
	// standard: 200ms doubling, capped at 60s, jittered).
	Backoff func(n int) time.Duration
	Logger  *slog.Logger
	// IDKey is the session's secret that signs the runtime's envelope ids
	// (ids.go), at least 16 bytes. A durable session must give the same
	// key after a restart (its replayed ids must not change); nil uses a
	// random key.
	IDKey []byte
	// Go, when set, runs a function of the System's on a goroutine that
	// keeps its stack from one use to the next (internal/warm: its
	// broker's), reporting false when it cannot; a new goroutine runs it
	// otherwise. The goroutines of the nodes' mailboxes and the event
	// publisher start there: each session started them anew, and each grew
	// its stack, copying it, through its first firing.
	Go func(f func()) bool
	// Restore holds the scheduler's counters from a checkpoint (iterations
	// and budgets are not reset by a resume), and Firings the node firing
	// numbers (so that envelope ids stay unique).
	Restore *scheduler.Snapshot
	Firings map[string]uint64
	// OnStall is called when the session made no progress for the graph's
	// stall_timeout (after every node was stopped).
	OnStall func(reason string)
	// OnFatal is called when the session cannot go on: its journal or the
	// store refused a write (a full disk, a JetStream error). The journal
	// holds the last consistent state; a resume continues from it.
	OnFatal func(reason string)
	// OnEvent, when set, receives every event in order (numbered and
	// stamped) right after it is published, on the System's event
	// goroutine; it must not block for long. The session observes its own
	// events this way instead of reading them back from NATS.
	OnEvent func(*pb.Event)
	// Asking, when set, tells whether a node's running handler waits on a
	// person's answer, and to which question: Explain shows such a node as
	// waiting (the scheduler sees it running).
	Asking func(node string) (question string, ok bool)
	// Interest, when set, tells whether anyone subscribes to an event's
	// subject; events nobody listens to are not published (OnEvent still
	// gets them).
	Interest func(subject string) bool
	// NoSubscribeFlush: New does not wait for the server to confirm the
	// session's subscriptions (a round trip, 3–4% of a 10-node pipeline's
	// Run). For a caller through whose Conn passes everything published
	// to the session until the session has published something itself
	// (its input, its events): the server reads a connection in order, so
	// it holds the subscriptions before anything sent on Conn after them,
	// and whoever hears from the session hears it after them.
	NoSubscribeFlush bool
	// Wants, when set, tells whether OnEvent's reader needs events of a
	// kind. An event of a kind it does not want, on subjects nobody
	// subscribes to (Interest), goes nowhere: Emit drops it (it is not
	// numbered), and the firing path does not build it. Nil: every event
	// is wanted.
	Wants func(kind string) bool
}

// System owns the actor system, the node actors, their NATS subscriptions
// and every handler goroutine.
type System struct {
	cfg Config
	// stored is the highest work stream sequence the runtime published
	// (Send: a resume's pending envelopes, an output handOver left to the
	// stream), fed the highest the consumer handed to a node: an output is
	// handed over in process only while fed has caught up with stored, so
	// that it never overtakes an envelope on its way through the stream.
	stored, fed atomic.Uint64
	// busOut counts the envelopes the session published on core NATS for
	// its own nodes, busIn those its subscription received back: a
	// session that is not durable hands an output over in process only
	// while busIn has caught up with busOut, so that it never overtakes
	// one on its way through the bus (handLocal).
	busOut, busIn atomic.Uint64
	// work is the session's work stream, once a refused message was
	// removed from it (dropStored).
	workMu sync.Mutex
	work   jetstream.Stream
	// dlqMade: Config.DeadLetters made the dead-letter store (deadletter.go).
	dlqMu   sync.Mutex
	dlqMade atomic.Bool
	threads threadTable
	// branches enforces max_parallel across the forks of parallel nodes.
	branches branchSlots
	// steers holds steering messages for the next firing that does work.
	steers steerBox
	as     *asys // the actor system, kept for the next System at Stop
	root   *actor.RootContext
	log    *slog.Logger
	clk    clock.Clock
	ctx    context.Context // cancelled by Stop: handlers see it
	cancel context.CancelFunc

	mu sync.Mutex
	// actors are the live nodes' actors (each with its pid); retired the
	// ones a live edit removed, whose goroutines Stop still ends.
	actors  map[string]*nodeActor
	retired []*nodeActor
	spawned []*actor.PID // every actor spawned, removed from the registry at Stop
	subs    []*nats.Subscription
	stopped bool
	wg      sync.WaitGroup
	pinWG   sync.WaitGroup // the actors' pinned goroutines (the warm pool's)
	warm    warmPool

	// commitWhole: the journal keeps the run context, so a commit over no
	// base carries the whole context (ContextKeeper).
	commitWhole bool

	seq     atomic.Uint64 // event sequence
	topo    atomic.Pointer[topology]
	sched   *scheduler.Scheduler
	version atomic.Uint64 // the graph's version: 1, then +1 per live edit
	// editMu is held (read) by a node from choosing its edges to publishing
	// on them, and (write) by a live edit while it swaps the graph, so no
	// envelope is published on an edge the edit removed.
	editMu sync.RWMutex
	// ingress: the durable session's work stream stores its Stored
	// subjects, not its inboxes and edges (broker.WorkSubjects): the
	// nodes publish under Stored subjects, and outside input passes
	// through the session's ingress (narrowStream, ingress.go).
	ingress atomic.Bool
	// storedPrefix is sy.<session>.w., what Stored subjects start with.
	storedPrefix string

	// ctxs holds the run context of the envelopes the firings sent, for
	// their receivers (context.go).
	ctxs ctxStore
	// edgeSubjects: each edge's subject and the length of its prefix
	// (edgeNames), by edge; edgeMu is a leaf lock.
	edgeMu       sync.RWMutex
	edgeSubjects map[*graph.Edge]edgeName

	dedup *dedupWindow // envelope ids delivered recently
	ids   *idSigner    // signs the runtime's envelope ids
	// decoded: what the intake decoded, for the consumer's delivery of it.
	decoded decodedCache

	// Durable sessions: the session's consumer (guarded by mu), where the
	// envelopes of each subject go, and the ids of envelopes consumed
	// (committed) recently.
	consumer jetstream.Consumer
	routeMu  sync.RWMutex
	routes   map[string]route // by subject (both kinds of session)
	// The consumer's Consume (guarded by mu; resync.go), and the watch
	// that re-creates the consumer after a lost delivery.
	feed         *feed
	consumeEnded bool // stopConsuming was called: no feed starts again
	watch        consumerWatch
	// stallRestarts counts the feeds found stalled and consumed again (stall.go).
	stallRestarts atomic.Int64
	// held counts the deliveries of the session's consumer that nodes hold
	// unacknowledged (durable sessions), for lostAcks.
	held atomic.Int64
	// heldFull: held reached the consumer's bound (session.held_full
	// said), not yet fallen to half of it.
	heldFull atomic.Bool
	// settling holds, by node, the firings whose records the journal
	// stored and that the node's io goroutine has not taken yet
	// (settle); settleMu is a leaf lock.
	settleMu sync.Mutex
	settling map[*nodeActor][]settledFiring
	// Sessions that are not durable: the subscriptions that dispatch to
	// the nodes (guarded by mu); dispatchMu is held while one message is
	// handed over.
	nodeSubs   []*nats.Subscription
	dispatchMu sync.Mutex
	consumed   *dedupWindow
	consuming  bool // StartConsuming was called
	feedMade   bool // the consumer's feed was started (startFeed)
	// A work stream made late (lazy.go): lateMade once it is; lateMu
	// serializes its making (a leaf lock but for the JetStream round
	// trips it holds).
	lateMu   sync.Mutex
	lateMade atomic.Bool

	// forOthers: the System published something others read — an event
	// someone subscribed to, a dead letter (PublishedForOthers).
	forOthers atomic.Bool

	evSubjects sync.Map // event kind -> its two subjects (eventSubjects)
	// lastWhole: node id -> the whole context its last commit over no
	// base carried (wholeContext); wholeKept counts its nodes
	lastWhole sync.Map
	wholeKept atomic.Int64
	evKinds   atomic.Int64   // kinds stored in evSubjects, or tried
	evq       chan *pb.Event // events waiting to be published, in order
	evDone    chan struct{}  // closed when publishEvents has drained evq (up to Stop's nil)
	evMu      sync.RWMutex   // guards evClosed against Emit (lock order: mu, then evMu)
	evClosed  bool

	quiesce quiesceState // a handover: no new firing (quiesce.go)
}

// New validates cfg and spawns one actor per node, subscribed to its edge
// subjects and inbox. Nothing fires until an envelope arrives.
func New(cfg Config) (*System, error) {
	if cfg.Graph == nil || cfg.Conn == nil || cfg.Registry == nil || cfg.Journal == nil {
		return nil, errors.New("actors: Config needs Graph, Conn, Registry and Journal")
	}
	if cfg.Consume && cfg.JetStream == nil {
		return nil, errors.New("actors: Config.Consume needs JetStream")
	}
	if !broker.ValidToken(cfg.SessionID) {
		return nil, fmt.Errorf("actors: invalid session id %q", cfg.SessionID)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.IDKey == nil {
		cfg.IDKey = NewIDKey()
	} else if len(cfg.IDKey) < 16 {
		return nil, errors.New("actors: Config.IDKey must have at least 16 bytes")
	}
	cfg.Graph = withReverseEdges(cfg.Graph)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	as := takeActorSystem(cfg.Logger) // asys.go
	s := &System{
		cfg: cfg, as: as, root: as.as.Root, log: cfg.Logger, clk: cfg.Clock,
		ctx: ctx, cancel: cancel,
		actors:  make(map[string]*nodeActor, len(cfg.Graph.Nodes)),
		spawned: make([]*actor.PID, 0, len(cfg.Graph.Nodes)),
	}
	s.warm.wg, s.warm.spawn = &s.pinWG, s.goroutine
	s.commitWhole = true
	if k, ok := cfg.Journal.(ContextKeeper); ok {
		s.commitWhole = k.KeepsContext()
	}
	s.storedPrefix = strings.TrimSuffix(broker.AllStored(cfg.SessionID), ">")
	s.threads.seed(cfg.Threads)
	subjects := subjectsOf(cfg.SessionID, cfg.Graph) // for the topology and the routes
	s.topo.Store(topologyOf(cfg.Graph, subjects))
	s.version.Store(1)
	s.dedup = newDedupWindow(1 << 16)
	s.ids = newIDSigner(cfg.IDKey)
	s.routes, s.consumed = make(map[string]route, len(cfg.Graph.Nodes)+len(cfg.Graph.Edges)), newDedupWindow(1<<16)
	s.watch.wake = make(chan struct{}, 1)
	for _, id := range cfg.Consumed {
		s.consumed.add(id)
	}
	s.evq, s.evDone = as.eventQueue(), make(chan struct{})
	s.goroutine(s.publishEvents) // stopped by Stop, which queues a nil event and waits for evDone
	// The graph's configuration, read once per graph and shared.
	scfg, err := scheduler.ConfigOf(cfg.Graph)
	if err != nil {
		s.Stop()
		return nil, err
	}
	if s.sched, err = scheduler.New(scfg, cfg.Clock, s.onNotice); err != nil {
		s.Stop()
		return nil, err
	}
	if cfg.Restore != nil {
		s.sched.Restore(*cfg.Restore)
	}
	for i, n := range cfg.Graph.Nodes {
		if err := s.spawnWith(cfg.Graph, n, i, subjects); err != nil {
			s.Stop()
			return nil, err
		}
	}
	if cfg.Consume {
		if cfg.MakeStream != nil {
			s.ingress.Store(true)
		} else {
			err = s.narrowStreamFrom(cfg.StreamSubjects, s.topo.Load().subjects)
		}
		if err == nil && cfg.MakeStream == nil {
			err = s.createConsumer()
		}
	} else {
		err = s.subscribeNodes()
	}
	if err != nil {
		s.Stop()
		return nil, err
	}
	if err := s.subscribeControl(); err != nil {
		s.Stop()
		return nil, err
	}
	if cfg.Consume { // not durable: dispatch is the stray watcher too
		if err := s.subscribeIntake(); err != nil {
			s.Stop()
			return nil, err
		}
	}
	// Every subscription is at the server when New returns (unless the
	// caller needs no confirmation): this one round trip also covers what
	// the caller subscribed on Conn before (the session's answer subject).
	if !cfg.NoSubscribeFlush {
		if err := cfg.Conn.Flush(); err != nil {
			s.Stop()
			return nil, fmt.Errorf("actors: subscribe: %w", err)
		}
	}
	// The schedule nodes arm; a missed tick waits for CatchUp (cron.missed
	// says when one is too old to fire).
	s.emitScheduler(s.sched.Start())
	return s, nil
}

// onNotice routes a scheduler notice (called from timer goroutines and
// from scheduler calls, never under its lock) to the node's actor.
func (s *System) onNotice(n scheduler.Notice) {
	if n.Node == "" && n.Kind == "stall" {
		evs := s.sched.StallTimeout()
		s.emitScheduler(evs)
		if s.cfg.OnStall != nil && len(evs) > 0 {
			s.cfg.OnStall(evs[0].Reason)
		}
		return
	}
	s.wake(n.Node, &notice{kind: n.Kind})
}

// wake sends a message to a node's actor.
func (s *System) wake(node string, msg any) {
	s.mu.Lock()
	pid, ok := s.pidLocked(node)
	stopped := s.stopped
	s.mu.Unlock()
	if ok && !stopped {
		s.root.Send(pid, msg)
	}
}

// emitScheduler publishes the scheduler's events.
func (s *System) emitScheduler(evs []scheduler.Event) {
	for _, e := range evs {
		ev := &pb.Event{Kind: e.Kind, Node: e.Node, Message: e.Reason}
		keys := make([]string, 0, len(e.Fields))
		for k := range e.Fields {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ev.Attrs = append(ev.Attrs, &pb.KV{Key: k, Value: e.Fields[k]})
		}
		s.Emit(ev)
	}
}

// fatal stops the session's progress with reason.
func (s *System) fatal(reason string) {
	s.Emit(&pb.Event{Kind: "session.fatal", Message: reason})
	if s.cfg.OnFatal != nil {
		s.cfg.OnFatal(reason)
	}
}

// CatchUp fires, once, the cron ticks missed while nobody ran the session
// (scheduler.Start found them from the restored state). The owner calls
// it once it holds the session's lease and its journal is wired, so that
// the late firing is committed with the tick it stands for.
func (s *System) CatchUp() { s.sched.CatchUp() }

// Scheduler returns the session's scheduler (gate states, explain).
func (s *System) Scheduler() *scheduler.Scheduler { return s.sched }

// resolve finds a node's handler: its type, else (an unregistered explicit
// type) the shape table's (spec 4.2); and whether the handler is pure for
// the node (nodes.Pure: the middleware does not change that).
func (s *System) resolve(g *graph.Graph, n *graph.Node) (string, nodes.Handler, bool, error) {
	typ := g.HandlerType(n)
	if p := pool.Of(n); p != "" {
		// The handler runs on a worker; everything else of the firing
		// (scheduler, retries, budgets, journal, routing) stays here.
		h, err := s.cfg.Work.Handler(p)
		if err != nil {
			return "", nil, false, fmt.Errorf("actors: node %s: %w", n.ID, err)
		}
		return typ, nodes.Chain(h, s.cfg.Middleware...), false, nil
	}
	h, ok := s.cfg.Registry.Lookup(typ)
	if !ok {
		n2 := *n
		n2.Attrs = n.Attrs.Clone()
		delete(n2.Attrs, "type")
		typ = g.HandlerType(&n2)
		if h, ok = s.cfg.Registry.Lookup(typ); !ok {
			return "", nil, false, fmt.Errorf("actors: node %s: no handler registered for type %q", n.ID, typ)
		}
	}
	pure, _ := h.(nodes.Pure)
	return typ, nodes.Chain(h, s.cfg.Middleware...), pure != nil && pure.Pure(n), nil
}

// nodeMailbox makes the node actors' mailboxes: protoactor's lock-free
// unbounded queue, which costs an idle actor a 48-byte list head where the
// default one made a ring of ten slots (about 220 bytes per node).
var nodeMailbox = actor.UnboundedLockfree()

func (s *System) spawn(g *graph.Graph, n *graph.Node) error {
	return s.spawnWith(g, n, -1, nil)
}

// spawnWith is spawn of the i-th of g's nodes with the subjects of the
// session's nodes in g made (nil: made here).
func (s *System) spawnWith(g *graph.Graph, n *graph.Node, i int, sj *sessionSubjects) error {
	typ, h, pure, err := s.resolve(g, n)
	if err != nil {
		return err
	}
	a, err := newNodeActor(s, g, n, typ, h)
	if err != nil {
		return fmt.Errorf("actors: node %s: %w", n.ID, err)
	}
	a.pure = pure
	a.firing = s.cfg.Firings[n.ID]
	a.mailbox.pool = &s.warm
	a.mailbox.setInline(true) // the Started message, here
	pid, err := s.root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return a },
		actor.WithDispatcher(&a.mailbox), actor.WithMailbox(nodeMailbox)), s.as.name(n.ID))
	a.mailbox.setInline(false)
	if err != nil {
		return fmt.Errorf("actors: spawn %s: %w", n.ID, err)
	}
	s.mu.Lock()
	s.spawned = append(s.spawned, pid)
	a.pid = pid
	s.actors[n.ID] = a
	s.mu.Unlock()
	if sj == nil {
		sj = &sessionSubjects{names: namesOf(g)}
	}
	s.setRoute(sj.nodeIn(s.cfg.SessionID, n.ID, i), n.ID, pid)
	for _, e := range g.InEdges(n.ID) {
		_, subj := sj.edgeSubject(s.cfg.SessionID, e)
		s.setRoute(subj, n.ID, pid)
	}
	return nil
}

// subscribeNodes bridges the inboxes and edges of every node into their
// actors' mailboxes (a session that is not durable): one subscription per
// kind of subject for the whole session, dispatching by subject, instead
// of one per node and edge.
func (s *System) subscribeNodes() error {
	for _, pattern := range []string{broker.NodeIn(s.cfg.SessionID, "*"), broker.Edge(s.cfg.SessionID, ">")} {
		sub, err := s.cfg.Conn.Subscribe(pattern, s.dispatch)
		if err != nil {
			return fmt.Errorf("actors: subscribe %s: %w", pattern, err)
		}
		_ = sub.SetPendingLimits(-1, -1)
		s.mu.Lock()
		s.subs = append(s.subs, sub)
		s.nodeSubs = append(s.nodeSubs, sub)
		s.mu.Unlock()
	}
	return nil
}

// dispatch hands a core NATS message to the actor of the node that reads
// its subject; one that no node reads it refuses (stray), and it gives a
// publisher that asks its verdict.
func (s *System) dispatch(m *nats.Msg) {
	s.dispatchMu.Lock()
	defer s.dispatchMu.Unlock()
	s.routeMu.RLock()
	r, ok := s.routes[m.Subject]
	s.routeMu.RUnlock()
	if ok && s.deliver(r.pid, s.edgeOfSubject(m.Subject), m) {
		s.busIn.Add(1) // one of the session's own, in its node's mailbox now (handLocal)
	}
	if !ok || (m.Header != nil && m.Header.Get(broker.VerdictHeader) != "") {
		// This subscription is the stray watcher too (a second one on the
		// same subjects doubled every envelope's delivery).
		s.stray(m)
	}
}

// settleDispatch returns once every message the server sent before it was
// called has been handed to its actor (a live edit, before it stops
// routing a subject: what was published on it before the edit still
// arrives).
func (s *System) settleDispatch() {
	if err := s.cfg.Conn.Flush(); err != nil {
		return
	}
	s.mu.Lock()
	subs := s.nodeSubs
	s.mu.Unlock()
	for _, sub := range subs {
		for {
			n, _, err := sub.Pending()
			if err != nil || n == 0 || s.ctx.Err() != nil {
				break
			}
			time.Sleep(100 * time.Microsecond) // the queue empties at dispatch speed
		}
	}
	s.dispatchMu.Lock()
	//lint:ignore SA2001 waiting for the message being dispatched
	s.dispatchMu.Unlock()
}

// topology is the graph a session runs and what is derived from it; a
// live edit replaces it whole.
type topology struct {
	g     *graph.Graph
	joins map[string]string
	// subjects: the inbound subjects of the nodes (inboxes, edges).
	subjects map[string]bool
	// session: the graph is a reactive session's (Graph.Kind), read once;
	// a live edit cannot change it.
	session bool
}

// graph is the current graph.
func (s *System) graph() *graph.Graph { return s.topo.Load().g }

// isSession reports whether the graph is a reactive session's (Graph.Kind
// "session"), without looking its attributes up.
func (s *System) isSession() bool { return s.topo.Load().session }

// Graph returns the graph the session runs now.
func (s *System) Graph() *graph.Graph { return s.graph() }

// Version is the graph's version: 1, then one more per live edit.
func (s *System) Version() uint64 { return s.version.Load() }

// deliver runs on the NATS subscription goroutine: it decodes the envelope
// and hands it to the actor's mailbox. A malformed envelope, or one that
// checkIngress refuses, is rejected with a reason and never reaches the
// actor. It reports whether the envelope was the runtime's own (its proof
// holds).
func (s *System) deliver(pid *actor.PID, edgeID string, m *nats.Msg) (own bool) {
	env, err := DecodeEnvelope(m.Data)
	if err == nil {
		own, err = s.admit(env, m.Header.Get(HeaderOwn))
	}
	if err != nil {
		s.reject(m, err)
		return false
	}
	if env.Id == "" {
		env.Id = m.Header.Get(nats.MsgIdHdr)
	}
	if env.Id == "" {
		env.Id = nuid.Next()
	}
	if env.SessionId == "" {
		env.SessionId = s.cfg.SessionID
	}
	if c := callerFromHeaders(m.Header); c != nil {
		env.Caller = c
	}
	if !s.dedup.first(env.Id) {
		s.Emit(&pb.Event{Kind: "envelope.duplicate", EdgeId: edgeID, Message: "envelope " + env.Id + " was already delivered",
			Attrs: []*pb.KV{{Key: "subject", Value: m.Subject}}})
		return own
	}
	s.root.Send(pid, &delivery{edge: edgeID, env: env})
	return own
}

// handLocal hands env, an output of a firing in a session that is not
// durable, to the actor of the node of the session that reads subj, in
// process (a session's nodes all live in its one owner): the envelope
// crosses no bus, is neither encoded nor decoded, and its id needs no
// proof (it never left the runtime). It returns false, and the envelope is
// published on core NATS as before, when no node of the session reads subj
// (the stray watcher refuses it visibly), while an envelope the session
// published for its own nodes is still on its way (busIn behind busOut: a
// Go program's Execution.Publish, a child pipeline's steer; the edge keeps
// its order), when the envelope would be refused on arrival
// (checkEnvelope) and when Config.BusHops asks for every hop on the bus.
func (s *System) handLocal(subj, edge string, env *pb.Envelope) bool {
	if s.cfg.BusHops || s.busIn.Load() < s.busOut.Load() {
		return false
	}
	r, ok := s.routeOf(subj)
	if !ok || checkEnvelope(s.cfg.SessionID, env) != nil {
		return false
	}
	s.root.Send(r.pid, &delivery{edge: edge, env: env})
	return true
}

func (s *System) reject(m *nats.Msg, err error) {
	s.Emit(&pb.Event{Kind: "envelope.rejected", Message: err.Error(),
		Attrs: []*pb.KV{{Key: "subject", Value: m.Subject}}})
	s.deadLetter(&nats.Msg{Subject: broker.DeadLetter(s.cfg.SessionID), Data: m.Data})
}

// Send publishes env on subj the way node actors do (JetStream when
// configured). The session uses it to inject the first envelope and to
// replay pending envelopes on resume.
func (s *System) Send(ctx context.Context, subj string, env *pb.Envelope) error {
	data, err := proto.Marshal(env)
	if err != nil {
		return err
	}
	msg := &nats.Msg{Subject: subj, Data: data, Header: nats.Header{}}
	if id := env.GetId(); id != "" {
		msg.Header[HeaderOwn] = []string{s.ids.proof(id)}
	}
	if len(env.GetCaller()) > 0 {
		callerHeaders(msg.Header, env.GetCaller())
	}
	if s.cfg.JetStream != nil && s.topo.Load().subjects[subj] {
		// A pipeline started without a work stream has it made for the
		// first envelope the runtime stores (Execution.Publish, a steer,
		// an output left to the stream), as for outside input (lazy.go).
		if err := s.makeStreamLate(broker.Ingress(), true); err != nil {
			return err
		}
		// A server restarting is ridden through: the same id makes a
		// repeat harmless. The subject is chosen at each attempt: a live
		// edit may change the stream's mode meanwhile (narrowStream). A
		// subject no node receives on (a pending envelope for what a
		// live edit removed) is in no stream: it goes out on core NATS,
		// where the session refuses it visibly.
		return broker.Retry(ctx, 5*time.Second, func(ctx context.Context) error {
			msg.Subject = subj
			if s.ingress.Load() {
				msg.Subject = broker.Stored(subj)
			}
			ack, err := s.cfg.JetStream.PublishMsg(ctx, msg, jetstream.WithMsgID(env.GetId()))
			if err == nil {
				raise(&s.stored, ack.Sequence)
			}
			return err
		})
	}
	back := false // it comes back to a node of the session (handLocal)
	if !s.cfg.Consume && msg.Header[HeaderOwn] != nil {
		_, back = s.routeOf(subj)
	}
	if back {
		s.busOut.Add(1)
	}
	err = s.cfg.Conn.PublishMsg(msg)
	if err != nil && back {
		s.busOut.Add(^uint64(0)) // it will not come back
	}
	return err
}

// DeliverInput is Deliver of a new session's input, which its journal
// holds as pending: a durable session hands it to its node in process
// (handOver), as it hands a firing's outputs once their record is stored —
// the input's record is stored before the session exists, and a resume
// publishes it to the work stream if it was not consumed. It is sent
// through the work stream when it cannot be (handOver).
func (s *System) DeliverInput(ctx context.Context, subj string, env *pb.Envelope) error {
	if s.cfg.Consume && s.handOver(subj, "", env) {
		return nil
	}
	return s.Deliver(ctx, subj, env)
}

// Deliver is Send for the runtime's own envelopes to a node of the
// session (its input, a resume's pending envelopes): in a session that is
// not durable it hands env to the node's actor in process when it can
// (handLocal), as a firing's outputs are; otherwise it sends it.
func (s *System) Deliver(ctx context.Context, subj string, env *pb.Envelope) error {
	edge := ""
	if !s.cfg.Consume {
		edge = s.edgeOfSubject(subj)
	}
	if !s.cfg.Consume && s.handLocal(subj, edge, env) {
		return nil
	}
	return s.Send(ctx, subj, env)
}

// Emit publishes an event on sy.<session>.evt.<kind> (protobuf), and its
// JSON form (EventJSON) on sy.<session>.json.evt.<kind> when anyone
// subscribes there, stamping the session, sequence and time.
//
// Events are published in order by one goroutine of the System, off the
// actors' path; Emit blocks only when that goroutine is far behind.
func (s *System) Emit(ev *pb.Event) {
	if !s.Wanted(ev.Kind) {
		return
	}
	s.EmitWanted(ev)
}

// EmitWanted is Emit of an event whose maker asked Wanted of its kind
// first (so as not to make it for nobody): it is not asked again, which
// is two subscription lookups when a NATS subscriber wants it.
func (s *System) EmitWanted(ev *pb.Event) {
	if ev.Time == nil {
		ev.Time = timestamppb.New(s.clk.Now())
	}
	s.evMu.RLock()
	defer s.evMu.RUnlock()
	if s.evClosed {
		return
	}
	s.evq <- ev
}

// Wanted reports whether an event of kind would reach anyone: OnEvent's
// reader (Config.Wants) or a subscriber of its subjects (Config.Interest).
// Events nobody would see cost only this check.
func (s *System) Wanted(kind string) bool {
	if s.cfg.Wants == nil || s.cfg.Interest == nil || s.cfg.Wants(kind) {
		return true
	}
	sj := s.eventSubjects(kind)
	return s.cfg.Interest(sj[0]) || s.cfg.Interest(sj[1])
}

// maxEventKinds bounds the kinds whose subjects are kept (eventSubjects).
const maxEventKinds = 256

// eventSubjects is the protobuf and JSON subject of an event kind, made
// once per kind (up to maxEventKinds).
func (s *System) eventSubjects(kind string) [2]string {
	if v, ok := s.evSubjects.Load(kind); ok {
		return v.([2]string)
	}
	sj := [2]string{broker.Event(s.cfg.SessionID, kind), broker.JSONEvent(s.cfg.SessionID, kind)}
	if s.evKinds.Add(1) <= maxEventKinds {
		s.evSubjects.Store(kind, sj)
	}
	return sj
}

// publishEvents numbers and publishes the queued events until Stop closes
// the queue.
//
// Whether anyone subscribes to a subject (Config.Interest) is asked once
// for the events that were queued when it was asked: each of them was
// emitted before the answer, so a subscriber the answer does not know
// came after its event (a subscriber an event missed by an earlier answer
// would miss it all the same, subscribing while it was queued). An
// ingest's firings queue their node.completed events faster than the
// answers are given (two subscription lookups an event, ~2% of the CPU).
func (s *System) publishEvents() {
	defer close(s.evDone)
	subjects := map[string][2]string{} // by kind: the protobuf and JSON subjects
	var known eventInterest
	for ev := range s.evq {
		if ev == nil {
			return // Stop: the queue is empty now, and nothing is queued again
		}
		known.next()
		ev.SessionId = s.cfg.SessionID
		ev.Seq = s.seq.Add(1)
		sj, ok := subjects[ev.Kind]
		if !ok {
			sj = [2]string{broker.Event(s.cfg.SessionID, ev.Kind), broker.JSONEvent(s.cfg.SessionID, ev.Kind)}
			if len(subjects) < 256 {
				subjects[ev.Kind] = sj
			}
		}
		if subj := sj[0]; s.cfg.Interest == nil || known.interest(s, subj) {
			data, err := proto.Marshal(ev)
			if err != nil {
				s.log.Error("actors: marshal event", "err", err)
				continue
			}
			if err := s.cfg.Conn.Publish(subj, data); err != nil {
				s.log.Error("actors: publish event", "kind", ev.Kind, "err", err)
			}
			s.publishedForOthers()
		}
		// The JSON form, for any NATS client, only when someone listens.
		if subj := sj[1]; s.cfg.Interest == nil || known.interest(s, subj) {
			if data, err := EventJSON(ev); err == nil {
				if err := s.cfg.Conn.Publish(subj, data); err != nil {
					s.log.Error("actors: publish event", "kind", ev.Kind, "err", err)
				}
				s.publishedForOthers()
			}
		}
		if s.cfg.OnEvent != nil {
			s.cfg.OnEvent(ev)
		}
	}
}

// eventInterest is what publishEvents learnt of Config.Interest, and for
// how many more events of the queue it holds.
type eventInterest struct {
	answers map[string]bool // by subject
	left    int             // events queued when the answers were given, not yet taken
}

// next is called for each event taken from the queue: the answers hold
// for it if it was queued when they were given.
func (k *eventInterest) next() {
	if k.left == 0 {
		clear(k.answers)
		return
	}
	k.left--
}

// interest is Config.Interest(subj), asked or known (see publishEvents).
func (k *eventInterest) interest(s *System, subj string) bool {
	if ok, found := k.answers[subj]; found {
		return ok
	}
	if len(k.answers) == 0 {
		// The answers given from here hold for the events queued behind
		// this one now (and only those: one queued later may have been
		// emitted after a subscriber came).
		k.left = len(s.evq)
		if k.answers == nil {
			k.answers = make(map[string]bool, 4)
		}
	}
	ok := s.cfg.Interest(subj)
	k.answers[subj] = ok
	return ok
}

// publishedForOthers notes that the System published something others
// read.
func (s *System) publishedForOthers() {
	if !s.forOthers.Load() {
		s.forOthers.Store(true)
	}
}

// PublishedForOthers reports whether the System published on NATS
// something others read: an event someone subscribed to, a dead letter.
// What else it publishes is an envelope for a node of its own, or a reply
// to a request (its requester waits for it).
func (s *System) PublishedForOthers() bool { return s.forOthers.Load() }

// SetEventSeq continues event numbering after a resume.
func (s *System) SetEventSeq(n uint64) { s.seq.Store(n) }

// Trigger fires a node now (manual triggers): with what its gate holds,
// else with env (nil: an empty tick).
func (s *System) Trigger(node string, env *pb.Envelope) error {
	s.mu.Lock()
	pid, ok := s.pidLocked(node)
	stopped := s.stopped
	s.mu.Unlock()
	if stopped {
		return ErrStopped
	}
	if !ok {
		return fmt.Errorf("actors: no node %q", node)
	}
	s.root.Send(pid, &trigger{env: env})
	return nil
}

// goroutine runs f on a goroutine of Config.Go, or on a new one; f's
// owner waits for it.
func (s *System) goroutine(f func()) {
	if s.cfg.Go == nil || !s.cfg.Go(f) {
		go f()
	}
}

// runOn runs f on p, a goroutine owned by the system; it refuses after
// Stop, which waits for f.
func (s *System) runOn(at *atomic.Pointer[pinned], f func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	s.wg.Add(1)
	s.pinnedLocked(at).Schedule(func() {
		defer s.wg.Done()
		f()
	})
	return true
}

// handOff is runOn from the goroutine running from (inside its
// function): f runs on p, on this goroutine once from runs dry
// (pinned.handOff). f must call s.wg.Done when it returns (a node's run
// function, made once: a closure wrapping f was an allocation per
// firing).
func (s *System) handOff(from *pinned, to *atomic.Pointer[pinned], f func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	s.wg.Add(1)
	from.handOff(s.pinnedLocked(to), f)
	return true
}

// pinnedLocked is the queue at holds, made on the System's warm pool when
// it has none yet (s.mu held, the System not stopped: Stop finds every
// queue made before it, and none is made after).
func (s *System) pinnedLocked(at *atomic.Pointer[pinned]) *pinned {
	p := at.Load()
	if p == nil {
		p = &pinned{pool: &s.warm}
		at.Store(p)
	}
	return p
}

// Stop cancels running handlers, unsubscribes, stops every actor and waits
// for all goroutines. It is idempotent.
func (s *System) Stop() {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	s.stopped = true
	subs := s.subs
	type live struct {
		pid *actor.PID
		a   *nodeActor
	}
	pids := make([]live, 0, len(s.actors))
	for _, a := range s.actors {
		pids = append(pids, live{a.pid, a})
	}
	s.mu.Unlock()
	s.stopConsuming()
	for _, sub := range subs {
		_ = sub.Unsubscribe()
	}
	if s.sched != nil {
		s.sched.Close()
	}
	s.cancel()
	s.wg.Wait()
	for _, p := range pids {
		if p.a != nil && p.a.stopIdle() {
			continue
		}
		_, _ = s.as.await(func() *actor.Future { return s.root.PoisonFuture(p.pid) })
	}
	s.mu.Lock()
	for _, a := range s.actors {
		a.stopPinned()
	}
	for _, a := range s.retired {
		a.stopPinned()
	}
	spawned := s.spawned
	s.mu.Unlock()
	s.warm.close()
	s.pinWG.Wait()
	s.evMu.Lock()
	s.evClosed = true
	s.evMu.Unlock()
	// The queue ends with a nil event rather than closed: drained, it is
	// kept with the actor system for the next System (asys.eventQueue).
	s.evq <- nil
	<-s.evDone
	s.as.evq = s.evq
	s.as.release(spawned)
}

// Done reports whether Stop was called.
func (s *System) stoppedNow() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopped
}

// pidOf is a node's actor (nil when it has none).
func (s *System) pidOf(node string) *actor.PID {
	s.mu.Lock()
	defer s.mu.Unlock()
	pid, _ := s.pidLocked(node)
	return pid
}

// pidLocked is the pid of node's live actor (s.mu held).
func (s *System) pidLocked(node string) (*actor.PID, bool) {
	if a := s.actors[node]; a != nil {
		return a.pid, true
	}
	return nil, false
}
