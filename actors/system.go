package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/edges"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/nodes"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// ErrStopped is returned by calls on a stopped System.
var ErrStopped = errors.New("actors: system stopped")

// Config is what a System needs to run a graph.
type Config struct {
	SessionID string
	Graph     *graph.Graph
	Conn      *nats.Conn
	// JetStream, when set, makes every envelope publication a JetStream
	// publish acknowledged by the server (durable), with the envelope id as
	// the de-duplication id. Nil publishes on core NATS.
	JetStream jetstream.JetStream
	Registry  *nodes.Registry
	Journal   Journal
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
	// Restore holds node counters from a checkpoint.
	Restore map[string]*pb.NodeRecord
	// Firings is the session's firing count restored from a checkpoint.
	Firings uint64
}

// System owns the actor system, the node actors, their NATS subscriptions
// and every handler goroutine.
type System struct {
	cfg    Config
	as     *actor.ActorSystem
	root   *actor.RootContext
	log    *slog.Logger
	clk    clock.Clock
	ctx    context.Context // cancelled by Stop: handlers see it
	cancel context.CancelFunc

	mu      sync.Mutex
	pids    map[string]*actor.PID
	actors  map[string]*nodeActor
	subs    []*nats.Subscription
	stopped bool
	wg      sync.WaitGroup

	seq     atomic.Uint64 // event sequence
	firings atomic.Uint64 // node firings across the session
	joins   map[string]string
}

// New validates cfg and spawns one actor per node, subscribed to its edge
// subjects and inbox. Nothing fires until an envelope arrives.
func New(cfg Config) (*System, error) {
	if cfg.Graph == nil || cfg.Conn == nil || cfg.Registry == nil || cfg.Journal == nil {
		return nil, errors.New("actors: Config needs Graph, Conn, Registry and Journal")
	}
	if !broker.ValidToken(cfg.SessionID) {
		return nil, fmt.Errorf("actors: invalid session id %q", cfg.SessionID)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	as := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return cfg.Logger }))
	s := &System{
		cfg: cfg, as: as, root: as.Root, log: cfg.Logger, clk: cfg.Clock,
		ctx: ctx, cancel: cancel,
		pids: map[string]*actor.PID{}, actors: map[string]*nodeActor{},
	}
	s.firings.Store(cfg.Firings)
	s.joins = joinNodes(cfg.Graph)
	for _, n := range cfg.Graph.Nodes {
		if err := s.spawn(n); err != nil {
			s.Stop()
			return nil, err
		}
	}
	if err := cfg.Conn.Flush(); err != nil {
		s.Stop()
		return nil, fmt.Errorf("actors: subscribe: %w", err)
	}
	return s, nil
}

func (s *System) spawn(n *graph.Node) error {
	typ := s.cfg.Graph.HandlerType(n)
	h, ok := s.cfg.Registry.Lookup(typ)
	if !ok {
		// An unregistered explicit type falls back to the shape table (spec 4.2).
		n2 := *n
		n2.Attrs = n.Attrs.Clone()
		delete(n2.Attrs, "type")
		typ = s.cfg.Graph.HandlerType(&n2)
		if h, ok = s.cfg.Registry.Lookup(typ); !ok {
			return fmt.Errorf("actors: node %s: no handler registered for type %q", n.ID, typ)
		}
	}
	a := newNodeActor(s, n, typ, h)
	if rec := s.cfg.Restore[n.ID]; rec != nil {
		a.visits = int(rec.Visits)
		a.firing = uint64(rec.Visits)
	}
	pid, err := s.root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return a }), "node-"+n.ID)
	if err != nil {
		return fmt.Errorf("actors: spawn %s: %w", n.ID, err)
	}
	s.mu.Lock()
	s.pids[n.ID] = pid
	s.actors[n.ID] = a
	s.mu.Unlock()
	subjects := []string{broker.NodeIn(s.cfg.SessionID, n.ID)}
	for _, e := range s.cfg.Graph.Incoming(n.ID) {
		subjects = append(subjects, broker.Edge(s.cfg.SessionID, edges.EdgeID(e)))
	}
	for _, subj := range subjects {
		sub, err := s.cfg.Conn.Subscribe(subj, func(m *nats.Msg) { s.deliver(pid, m) })
		if err != nil {
			return fmt.Errorf("actors: subscribe %s: %w", subj, err)
		}
		_ = sub.SetPendingLimits(-1, -1)
		s.mu.Lock()
		s.subs = append(s.subs, sub)
		s.mu.Unlock()
	}
	return nil
}

// deliver runs on the NATS subscription goroutine: it decodes the envelope
// and hands it to the actor's mailbox. A malformed envelope is rejected with
// a reason and never reaches the actor.
func (s *System) deliver(pid *actor.PID, m *nats.Msg) {
	env, err := DecodeEnvelope(m.Data)
	if err != nil {
		s.reject(m, err)
		return
	}
	s.root.Send(pid, &delivery{subject: m.Subject, env: env})
}

func (s *System) reject(m *nats.Msg, err error) {
	s.Emit(&pb.Event{Kind: "envelope.rejected", Message: err.Error(),
		Attrs: []*pb.KV{{Key: "subject", Value: m.Subject}}})
	_ = s.cfg.Conn.Publish(broker.DeadLetter(s.cfg.SessionID), m.Data)
}

// Send publishes env on subj the way node actors do (JetStream when
// configured). The session uses it to inject the first envelope and to
// replay pending envelopes on resume.
func (s *System) Send(ctx context.Context, subj string, env *pb.Envelope) error {
	data, err := proto.Marshal(env)
	if err != nil {
		return err
	}
	if s.cfg.JetStream != nil {
		_, err = s.cfg.JetStream.Publish(ctx, subj, data, jetstream.WithMsgID(env.GetId()))
		return err
	}
	return s.cfg.Conn.Publish(subj, data)
}

// Emit publishes an event on sy.<session>.evt.<kind>, stamping the session,
// sequence and time.
func (s *System) Emit(ev *pb.Event) {
	ev.SessionId = s.cfg.SessionID
	ev.Seq = s.seq.Add(1)
	if ev.Time == nil {
		ev.Time = timestamppb.New(s.clk.Now())
	}
	data, err := proto.Marshal(ev)
	if err != nil {
		s.log.Error("actors: marshal event", "err", err)
		return
	}
	if err := s.cfg.Conn.Publish(broker.Event(s.cfg.SessionID, ev.Kind), data); err != nil {
		s.log.Error("actors: publish event", "kind", ev.Kind, "err", err)
	}
}

// SetEventSeq continues event numbering after a resume.
func (s *System) SetEventSeq(n uint64) { s.seq.Store(n) }

// Trigger asks a node to fire now with an empty tick (manual triggers).
func (s *System) Trigger(node string, env *pb.Envelope) error {
	s.mu.Lock()
	pid, ok := s.pids[node]
	stopped := s.stopped
	s.mu.Unlock()
	if stopped {
		return ErrStopped
	}
	if !ok {
		return fmt.Errorf("actors: no node %q", node)
	}
	s.root.Send(pid, &delivery{subject: "trigger", env: env})
	return nil
}

// goFunc runs f on a goroutine owned by the system; it refuses after Stop.
func (s *System) goFunc(f func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
	return true
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
	pids := make([]*actor.PID, 0, len(s.pids))
	for _, p := range s.pids {
		pids = append(pids, p)
	}
	s.mu.Unlock()
	for _, sub := range subs {
		_ = sub.Unsubscribe()
	}
	s.cancel()
	s.wg.Wait()
	for _, p := range pids {
		_ = s.root.PoisonFuture(p).Wait()
	}
	s.as.Shutdown()
}

// Done reports whether Stop was called.
func (s *System) stoppedNow() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopped
}
