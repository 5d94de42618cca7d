package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchyard/switchyard/actors"
	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/internal/crash"
	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/pool"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/scheduler"
)

// Config is what a session needs. Graph and Broker are required.
type Config struct {
	// ID names the session in its subjects; generated when empty.
	ID     string
	Graph  *graph.Graph
	Broker *broker.Broker
	// Registry resolves handler types; nil uses the built-ins with Deps.
	Registry *nodes.Registry
	// Deps configures the built-in handlers when Registry is nil.
	Deps nodes.Deps
	// ControlAnswers lets people answer human gates on the session's
	// sy.<session>.ctl.answer subject when Deps.Interviewer has no answer
	// (always the case when Deps.Interviewer is nil).
	ControlAnswers bool
	// LogsDir is the run directory; empty keeps no files.
	LogsDir string
	// WorkDir is where tools and agents run (default: LogsDir, else ".").
	WorkDir string
	// Durable makes the session survive a crash of its process: envelopes
	// are published through JetStream (acknowledged, de-duplicated by id)
	// and each node consumes them from the session's stream with explicit
	// acknowledgement after its firing is committed; checkpoints are
	// written to the session's KV bucket (history, resume by id).
	Durable bool
	// BusHops puts every envelope between two nodes of a session that is
	// not durable on the bus, on its edge or inbox subject, where any
	// client subscribed to the session's edges sees it (a tool reading
	// the wire). By default such envelopes are handed to the receiving
	// node's actor in process (the session's nodes all live in its
	// owner), which costs no encode, no server round trip and no decode;
	// the events report every hop either way. A durable session always
	// hands them over once their firing's record is stored.
	BusHops bool
	// Context seeds the run context (after the graph's own keys).
	Context map[string]string
	// Input is the message the start node receives.
	Input  string
	Clock  clock.Clock
	Logger *slog.Logger
	// Observer receives every event of the session, in order, on the
	// session's event goroutine. It must not block for long.
	Observer func(*pb.Event)
	// ObserverWants, when set, tells which event kinds the Observer needs;
	// nil: all of them. An event that neither the Observer, the session's
	// report (node.completed, session.completed) nor a NATS subscriber of
	// its subject wants is not made (a firing's node.started and
	// edge.selected, when nothing watches).
	ObserverWants func(kind string) bool
	// Backoff overrides the retry delay (tests); nil uses the spec's preset.
	Backoff func(n int) time.Duration
	// Caller is whose work the session does (tenant, user, trace, custom
	// keys); it reaches every node's context and is carried with every
	// envelope. When zero, Start takes it from its ctx (nodes.WithCaller).
	Caller nodes.Caller
	// Metadata is the initial input's metadata: every node sees it, merged
	// with what earlier nodes added (nodes.Input.Metadata).
	Metadata map[string]string
	// Checkpoint says when the checkpoint is written. Nil writes after
	// every envelope and keeps the checkpoint (what the CLI does).
	Checkpoint *CheckpointPolicy
	// Handlers adds handler types to the built-ins (replacing a built-in
	// of the same name) when Registry is nil.
	Handlers map[string]nodes.Handler
	// Middleware wraps every node's handler, the first outermost.
	Middleware []nodes.Middleware
	// OnJournalWrite, when set, is told how long each journal commit (a
	// firing's record, a checkpoint) took, and its error (metrics). It is
	// called on the committing goroutine and must not block.
	OnJournalWrite func(d time.Duration, err error)
	// ForkOf and FromCheckpoint make Resume start a new durable session
	// (ID) from another one's checkpoint (0: its latest).
	ForkOf         string
	FromCheckpoint uint64
	// Reopen lets Resume run a session its operator stopped (see End);
	// ReopenedBy is recorded as who did. Without it such a resume is
	// refused with a *StoppedError.
	Reopen     bool
	ReopenedBy string
	// LeaseTTL is how long a durable session's lease lasts without renewal
	// (DefaultLeaseTTL when zero): another process may take the session
	// over that long after its owner died.
	LeaseTTL time.Duration
	// File is the graph's file, recorded with a durable session (serve
	// resumes the sessions of the files it is given).
	File string
	// NoSubscribeFlush: Start does not wait for the server to confirm the
	// session's subscriptions (actors.Config.NoSubscribeFlush): for a
	// caller that publishes to the session only through Broker's
	// connection, and whose Observer publishes nothing elsewhere on the
	// session's first event (nothing outside the process has heard of the
	// session before it publishes there).
	NoSubscribeFlush bool
	// prepared is the store made ahead that start took for this session
	// (prepared.go).
	prepared *preparedStore
	// late: a new durable pipeline that runs (not one placed for another
	// member to resume): its work stream is made when outside input first
	// comes, or when it is left unfinished (actors.Config.MakeStream).
	late bool
	// early, for a new durable pipeline that Start runs: its creation is
	// sent before its actors are made (earlyStart).
	early *earlyStart
	// generated: the id was generated here (NewID), so no session of the
	// store has it (broker.Generated).
	generated bool

	// Replicas is how many copies JetStream keeps of a durable session's
	// stream, buckets and object store (3 on a cluster survives the loss of
	// a server); 0 takes the graph's replicas attribute, else 1. Resources
	// that exist with more keep them.
	Replicas int
}

// replicas is the replica count cfg asks for.
func (cfg *Config) replicas() int {
	if cfg.Replicas > 0 {
		return cfg.Replicas
	}
	if cfg.Graph != nil {
		if n, err := strconv.Atoi(cfg.Graph.Attrs.String("replicas")); err == nil && n > 0 {
			return n
		}
	}
	return 1
}

// Session is a running graph.
type Session struct {
	cfg Config
	id  string
	sys *actors.System
	// sysLive is sys for goroutines that may run before it is set (the
	// answer subscription).
	sysLive atomic.Pointer[actors.System]
	jr      *journal
	sweep   *sweeper // a durable session's artifact retention
	ctl     *ControlInterviewer
	// registry is the handler registry, shared with child sessions.
	registry *nodes.Registry
	events   chan *pb.Event // from the actors' event goroutine to eventLoop
	report   *reporter

	stopOnce sync.Once
	done     chan struct{} // closed when the session.completed event was seen
	loopDone chan struct{}
	finish   sync.Once
	started  time.Time
	// failNode and failCause say which node's failure ended the run, and
	// why (Report.Node, Report.Cause); guarded by failMu.
	failMu    sync.Mutex
	failNode  string
	failCause error
	resumed   []*pb.Envelope // pending envelopes of the checkpoint resumed from
	// endedAt is the whole context of a session resumed after its end was
	// recorded (its journal's last state is not running): nothing runs
	// again, and EndContext tells what had reached the end.
	endedAt map[string]string
	lease   *lease // a durable session's lease, released by Stop
	// leaseGone is set when another process took the session over; ended
	// when an operator's stop was recorded (End).
	leaseGone, ended atomic.Bool
	// created is set for a new durable session (a start or a fork): until
	// it is recorded, abandon removes what it wrote.
	created bool
	// placed is set for a session Create recorded to run elsewhere: its
	// Stop is no event.
	placed bool
	// handedOver is set by Handover: its Stop says session.moved.
	handedOver atomic.Bool
	// work sends the firings of pool nodes to workers (nil without
	// JetStream).
	work *pool.Dispatcher
	// deadLetters is set once the session asked for its dead-letter
	// stream (it is made before the first dead letter).
	deadLetters atomic.Bool
	// artifacts is set once a node of the session began storing an
	// artifact (its object store is made on the first).
	artifacts atomic.Bool
	// prepared is set when the session took a store made ahead for it
	// (prepared.go): its stream lists its subjects when the session is
	// left unfinished, and a successful session's removal is that
	// preparer's, in the background.
	prepared *preparer
	// sharedIn is the preparer whose shared bucket the session was placed
	// in without a prepared store (sharedFor): its removal purges its keys
	// through that preparer's handle of the bucket's stream, in the
	// background like a prepared store's.
	sharedIn *preparer
	// leaseLater: the lease is released by cleanup once the store is
	// removed (a successful session whose policy keeps nothing), in the
	// background for a session in the shared bucket (on a prepared store,
	// or named): held meanwhile, no other process claims the id while its
	// store is being removed.
	leaseLater bool
	// unstarted: a start that failed; removeUnstarted releases the lease
	// once what the start wrote is removed.
	unstarted bool
	// unhold releases the session's hold on its broker's connection
	// (broker.Broker.Hold).
	unhold func()
}

// abandon stops a session whose start failed before it was recorded, and
// removes what it wrote to the store: an unrecorded session leaves
// nothing behind.
func (s *Session) abandon() {
	s.unstarted = true // Stop leaves the lease to removeUnstarted
	s.Stop()
	s.removeUnstarted()
}

// removeUnstarted removes what a new durable session whose start failed
// wrote to the store, and then releases its lease (s.unstarted: closeEvents
// left it): held meanwhile, no other process claims the id while what
// the start wrote is removed.
func (s *Session) removeUnstarted() {
	if s.created && s.cfg.Durable && !s.leaseGone.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = broker.DeleteSession(ctx, s.cfg.Broker.JetStream(), s.id, broker.LeaseLeft())
		if s.lease != nil {
			s.lease.purge = true
		}
	}
	s.lease.release()
}

// StartError is the error of a Start that failed: the session's id (the
// one given, or the one it was given) and why. Nothing of a session that
// failed to start stays in the store.
type StartError struct {
	ID  string
	Err error
}

func (e *StartError) Error() string { return e.Err.Error() }
func (e *StartError) Unwrap() error { return e.Err }

// NewID returns a fresh session id.
func NewID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "s" + hex.EncodeToString(b[:])
}

// Start starts a session from the start node. When ctx ends after the
// session was recorded (while its input is being delivered), Start still
// returns the session: the caller sees ctx's end and stops it, and the
// session can be resumed.
func Start(ctx context.Context, cfg Config) (*Session, error) { return start(ctx, cfg, true) }

// Create records a new durable session in the store without running it
// here: its graph, its input (a pipeline's) and its record of itself, as
// Start does, and then gives its lease up. The session is running for the
// store (Running lists it), with no owner: the process that resumes it —
// a member of the deployment placement chooses (placement.go) — runs it
// from its start.
func Create(ctx context.Context, cfg Config) error {
	if !cfg.Durable {
		return errors.New("session: only a durable session can be created to run elsewhere")
	}
	_, err := start(ctx, cfg, false)
	return err
}

func start(ctx context.Context, cfg Config, run bool) (_ *Session, err error) {
	// A durable pipeline started with a generated id may take a store made
	// ahead for it, id and all (prepared.go).
	if run && preparable(&cfg) {
		if p := preparerOf(cfg.Broker); p != nil {
			if ps := p.take(&cfg); ps != nil {
				cfg.ID, cfg.prepared = ps.id, ps
			}
		}
	}
	if cfg.ID == "" {
		cfg.ID, cfg.generated = NewID(), true
	}
	cfg.late = run && cfg.Durable && cfg.ForkOf == "" && cfg.Graph != nil && cfg.Graph.Kind() != "session"
	defer func() {
		if err != nil {
			err = &StartError{ID: cfg.ID, Err: err}
		}
	}()
	if cfg.late && cfg.Graph.StartNode() != nil && !hasSchedule(cfg.Graph) {
		cfg.early = &earlyStart{ctx: ctx}
	}
	s, err := newSession(cfg)
	if err != nil {
		return nil, err
	}
	var env *pb.Envelope
	if e := cfg.early; e != nil && e.t != nil {
		// Sent while the actors were made (newSessionWith): its
		// acknowledgements are read now.
		env = e.env
		if err := s.jr.finishStart(e.t); err != nil {
			s.abandon()
			return nil, err
		}
	} else {
		if err := s.writeManifest(); err != nil {
			s.abandon()
			return nil, err
		}
		if cfg.Graph.Kind() != "session" {
			if cfg.Graph.StartNode() == nil {
				s.abandon()
				return nil, errors.New("session: the graph has no start node")
			}
			env = s.inputEnvelope(ctx, s.sys.MintID)
		}
		// A durable session is recorded in an order that makes its creation
		// atomic: its graph, then its input (the first journal record), and
		// last its record of itself (session.meta), which is what makes it
		// exist — for resume, for the list of sessions, for "already exists".
		// Whatever a crash leaves before that is not a session: resume says
		// nothing was recorded, and the next start under the id writes over it.
		if err := s.jr.recordStart(ctx, cfg.Graph, env, s.meta()); err != nil {
			s.abandon()
			return nil, err
		}
	}
	crash.Point("create-meta")
	s.sys.Emit(&pb.Event{Kind: "session.started", Message: cfg.Graph.Name,
		Attrs: []*pb.KV{{Key: "goal", Value: cfg.Graph.Goal()}, {Key: "kind", Value: cfg.Graph.Kind()}}})
	if !run {
		// Recorded, and left to the member that resumes it: its input is
		// in the journal, delivered by that resume.
		s.placed = true
		s.Stop()
		return nil, nil
	}
	if env == nil {
		return s, nil
	}
	if err := s.sys.DeliverInput(ctx, broker.NodeIn(s.id, env.GetToNode()), env); err != nil {
		if ctx.Err() != nil {
			// ctx ended while the input was on its way: the session exists
			// (its checkpoint holds the input, Resume delivers it), so it
			// is returned for the caller to stop and report.
			return s, nil
		}
		s.Stop()
		return nil, fmt.Errorf("session: start: %w", err)
	}
	return s, nil
}

// inputEnvelope is a pipeline's input, to its start node, its id signed
// by mint.
func (s *Session) inputEnvelope(ctx context.Context, mint func(string) string) *pb.Envelope {
	cfg := &s.cfg
	caller := cfg.Caller
	if caller.IsZero() {
		caller, _ = nodes.CallerFrom(ctx)
	}
	return &pb.Envelope{
		Id: mint(s.id + ".input"), SessionId: s.id, Kind: actors.KindHandoff, ToNode: cfg.Graph.StartNode().ID,
		CreatedAt: timestamppb.New(s.clock().Now()),
		Payload:   &pb.Payload{Message: cfg.Input},
		Context:   kvs(initialContext(*cfg)),
		// Whole (no base), and the runtime's: its receiver's outputs
		// name it as their base (actors/context.go).
		ContextVersion: 1,
		Metadata:       kvs(cfg.Metadata),
		Caller:         actors.CallerKV(caller),
	}
}

// meta is the session's record of itself.
func (s *Session) meta() *Meta {
	cfg := &s.cfg
	return &Meta{ID: s.id, Graph: cfg.Graph.Name, Kind: cfg.Graph.Kind(), Started: s.started.UTC(),
		Input: cfg.Input, File: cfg.File, LogsDir: absDir(cfg.LogsDir), WorkDir: absDir(cfg.WorkDir)}
}

// earlyStart is a new durable pipeline's creation — its graph, its input
// and its record of itself (recordStart) — sent before its actors are
// made, and read back once they are (finishStart): the actors take
// 110-150 µs to make, and the creation's round trip was waited for after
// them, a tenth of a 10-node pipeline's Run. The input's id is signed with
// the session's key (the actors are not there yet to sign it). The input's
// record carries no scheduler state (the actors' scheduler makes it): a
// pipeline with a schedule node, whose record holds when its schedule
// started, is created after its actors as before (hasSchedule).
type earlyStart struct {
	ctx context.Context
	env *pb.Envelope
	t   *taken // sent; nil when it was not (not durable, or a failure before)
}

// sendEarlyStart writes the manifest and sends the creation of a new
// durable pipeline (newSessionWith, its journal wired, before its actors
// are made); the journal's write lock stays held until finishStart.
func (s *Session) sendEarlyStart(e *earlyStart, key []byte) error {
	if err := s.writeManifest(); err != nil {
		return err
	}
	e.env = s.inputEnvelope(e.ctx, func(base string) string { return actors.MintID(key, base) })
	e.t = s.jr.sendStart(e.ctx, s.cfg.Graph, e.env, s.meta())
	return nil
}

// hasSchedule reports whether g has a node fired by a schedule.
func hasSchedule(g *graph.Graph) bool {
	for _, n := range g.Nodes {
		if n.Attrs.String("trigger") == scheduler.TriggerSchedule {
			return true
		}
	}
	return false
}

// Resume continues a session from its checkpoint: node counters, context
// and completed nodes are restored and the envelopes that were pending are
// delivered again. A durable session's checkpoint is read from its KV
// bucket (cfg.ID, or cfg.ForkOf to start a new session cfg.ID from another
// one's checkpoint cfg.FromCheckpoint, leaving that one intact); any other
// from checkpoint.json in cfg.LogsDir.
func Resume(ctx context.Context, cfg Config) (*Session, error) {
	var cp *Checkpoint
	var cl *lease
	var err error
	if cfg.Durable {
		src := cfg.ID
		if cfg.ForkOf != "" {
			src = cfg.ForkOf
			if cfg.ID == "" || cfg.ID == cfg.ForkOf {
				return nil, errors.New("session: a fork needs a new session id")
			}
		} else if cfg.FromCheckpoint != 0 {
			return nil, errors.New("session: resuming from an earlier checkpoint forks: give ForkOf and a new ID")
		}
		if src == "" {
			return nil, errors.New("session: resume needs the session id")
		}
		if cfg.Clock == nil {
			cfg.Clock = clock.Real()
		}
		if !broker.ValidToken(cfg.ID) {
			return nil, fmt.Errorf("session: invalid session id %q", cfg.ID)
		}
		if err := broker.ReservedSession(cfg.ID); err != nil {
			return nil, fmt.Errorf("session: %w", err)
		}
		// The lease first: the state is read once no other process can
		// write it.
		if cl, err = claim(ctx, &cfg, cfg.ForkOf != ""); err != nil {
			return nil, err
		}
		if cfg.ForkOf == "" {
			if err = checkStopped(ctx, &cfg, cl); err != nil {
				cl.release()
				return nil, err
			}
		}
		if cp, err = LoadCheckpoint(ctx, cfg.Broker, src, cfg.FromCheckpoint); err != nil {
			cl.release()
			return nil, err
		}
	} else {
		if cp, err = ReadCheckpoint(cfg.LogsDir); err != nil {
			return nil, err
		}
		if cfg.ID == "" {
			cfg.ID = cp.SessionID
		}
	}
	if cp.Graph != "" && cp.Graph != cfg.Graph.Name {
		if cl != nil {
			cl.release()
		}
		return nil, fmt.Errorf("session: checkpoint is of graph %q, not %q", cp.Graph, cfg.Graph.Name)
	}
	if cfg.ForkOf != "" {
		// A new session: its stream holds nothing yet, so nothing of the
		// original's is delivered again; the pending envelopes are its own.
		cp.SessionID, cp.Consumed = cfg.ID, nil
	} else if cfg.Durable {
		cronSince(ctx, &cfg, cp)
	}
	s, err := newSessionWith(cfg, cp, cl)
	if err != nil {
		return nil, err
	}
	pending := s.resumed
	if cfg.ForkOf != "" {
		for _, env := range pending {
			env.SessionId = cfg.ID
		}
		if err := s.jr.forked(ctx, &Meta{ID: cfg.ID, Graph: cfg.Graph.Name, Kind: cfg.Graph.Kind(), Started: s.started,
			ForkOf: cfg.ForkOf, ForkAt: cp.Seq, File: cfg.File, LogsDir: absDir(s.cfg.LogsDir), WorkDir: absDir(s.cfg.WorkDir)},
			dotOf(cfg.Graph)); err != nil {
			s.abandon()
			return nil, err
		}
	}
	if _, err := os.Stat(filepath.Join(s.cfg.LogsDir, "manifest.json")); s.cfg.LogsDir != "" && (cfg.ForkOf != "" || os.IsNotExist(err)) {
		// A fork's run directory is its own; a resumed session's gets the
		// manifest it lacks (a directory other than the first run's).
		if err := s.writeManifest(); err != nil {
			s.Stop()
			return nil, err
		}
	}
	// Resumed events sort after the first run's, also when it committed
	// nothing (Seq 0: its session.started was event 1).
	s.sys.SetEventSeq((cp.Seq + 1) * 1000)
	s.sys.Emit(&pb.Event{Kind: "session.resumed", Message: cp.CurrentNode,
		Attrs: []*pb.KV{{Key: "pending", Value: fmt.Sprint(len(pending))}}})
	if cp.Status != "running" {
		s.endedAt = cp.Context
		s.complete(cp.Status, cp.FailureReason)
		return s, nil
	}
	for _, env := range pending {
		subj := broker.NodeIn(s.id, env.GetToNode())
		if env.GetEdgeId() != "" {
			subj = broker.Edge(s.id, env.GetEdgeId())
		}
		if err := s.sys.Deliver(ctx, subj, env); err != nil {
			s.Stop()
			return nil, fmt.Errorf("session: resume: %w", err)
		}
	}
	if len(pending) == 0 && cfg.Graph.Kind() != "session" {
		s.complete("fail", "checkpoint has no pending work")
	}
	return s, nil
}

// gateOf looks a human gate up in the graph the session runs now.
func (s *Session) gateOf(node string) (nodes.QuestionType, []nodes.Option, bool) {
	sys := s.sysLive.Load()
	if sys == nil {
		// Not started yet: nothing to check against, the gate checks.
		return nodes.FreeText, nil, true
	}
	g := sys.Graph()
	n := g.Node(node)
	if n == nil || g.HandlerType(n) != graph.TypeHuman {
		return "", nil, false
	}
	qt, ok := nodes.ParseQuestionType(n.Attrs.String("human.question_type"))
	if !ok {
		return "", nil, false
	}
	return qt, nodes.Choices(g, node), true
}

func newSession(cfg Config) (*Session, error) { return newSessionWith(cfg, nil, nil) }

// newSessionWith makes a session, resuming from cp when it is not nil: the
// journal holds cp's state before any node starts. A durable session runs
// under its lease: cl when the caller took it, else taken here; the
// session releases it (also when it fails to start).
func newSessionWith(cfg Config, cp *Checkpoint, cl *lease) (*Session, error) {
	fail := func(err error) (*Session, error) {
		if cl != nil {
			cl.release()
		}
		return nil, err
	}
	var early *earlyStream // a new session's work stream, made while its bucket is
	var restore *scheduler.Snapshot
	var firings map[string]uint64
	var consumed []string
	if cp != nil {
		// Iterations count committed firings: a firing that was running
		// when the process died runs again under the same number, and is
		// not counted twice. Budgets keep what was spent (the work was
		// paid for, even if it runs again).
		restore = &scheduler.Snapshot{}
		if cp.Scheduler != nil {
			*restore = *cp.Scheduler
		}
		restore.Iterations, restore.Total = map[string]int{}, int(cp.Firings)
		for n, v := range cp.NodeVisits {
			restore.Iterations[n] = v
		}
		firings = map[string]uint64{}
		for n, v := range cp.NodeVisits {
			firings[n] = uint64(v)
		}
		for _, c := range cp.Consumed {
			consumed = append(consumed, c.ID)
		}
	}
	if cfg.Graph == nil || cfg.Broker == nil {
		return fail(errors.New("session: Config needs Graph and Broker"))
	}
	// A store made ahead for this start (start, prepared.go): its lease,
	// bucket, work stream and consumer. sharedIn: the preparer whose
	// shared bucket a new pipeline without one was placed in (sharedFor).
	var prepared, sharedIn *preparer
	if ps := cfg.prepared; ps != nil && cl == nil && cp == nil {
		prepared, cl = ps.p, ps.lease
	}
	if cfg.ID == "" {
		cfg.ID, cfg.generated = NewID(), true
	}
	if !broker.ValidToken(cfg.ID) {
		return fail(fmt.Errorf("session: invalid session id %q", cfg.ID))
	}
	if err := broker.ReservedSession(cfg.ID); err != nil {
		return fail(fmt.Errorf("session: %w", err))
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Durable && cl == nil {
		var fresh []broker.Option
		var shared *preparer // whose shared bucket a new pipeline was offered
		if cp == nil {
			fresh = append(fresh, broker.Fresh()) // a new session: its bucket is made in one request
			if cfg.generated {
				fresh = append(fresh, broker.Generated()) // not in the shared bucket: nobody had its id
			}
			if p, kv := sharedFor(&cfg); kv != nil {
				fresh, shared = append(fresh, broker.InShared(kv)), p
			}
		}
		var err error
		var leased func()
		if (cp == nil || cfg.ForkOf != "") && !cfg.late {
			early = &earlyStream{}
			leased = func() { early.start(cfg) }
		}
		cl, err = claimThen(context.Background(), &cfg, cp == nil || cfg.ForkOf != "", leased, fresh...)
		early.wait() // no path on leaves it running
		if err != nil {
			early.drop(cfg)
			return nil, err
		}
		if shared != nil && cl.bucket != nil && cl.bucket.Shared() {
			sharedIn = shared
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.WorkDir == "" {
		cfg.WorkDir = cfg.LogsDir
	}
	if cfg.LogsDir != "" {
		if err := os.MkdirAll(cfg.LogsDir, 0o755); err != nil {
			return fail(fmt.Errorf("session: logs dir: %w", err))
		}
	}
	s := &Session{cfg: cfg, id: cfg.ID, done: make(chan struct{}), loopDone: make(chan struct{}),
		events: make(chan *pb.Event, sessionEvents), report: newReporter(cfg.Graph), started: cfg.Clock.Now()}
	if cl != nil {
		s.lease = cl // released by closeEvents, on every path from here
	}
	// The broker's Close drains its connection while the session runs on
	// it (released by closeEvents too).
	s.unhold = cfg.Broker.Hold()
	s.prepared, s.sharedIn = prepared, sharedIn
	s.jr = newJournal(cfg.LogsDir, cfg.ID, cfg.Graph.Name, cfg.Clock)
	if k := cfg.Broker.JournalKeep(); k > 0 {
		s.jr.keep = uint64(k)
	}
	if cfg.Checkpoint != nil {
		s.jr.policy = *cfg.Checkpoint
		s.jr.cleanup = !cfg.Checkpoint.Retain
	}
	nc := cfg.Broker.Conn()
	reg := cfg.Registry
	if reg == nil && (cfg.ControlAnswers || cfg.Deps.Interviewer == nil) {
		// The built-ins ask people through the session's answer subject
		// when the configured interviewer has no answer.
		ctl, err := NewControlInterviewer(nc, cfg.ID, cfg.Clock, func(ev *pb.Event) { s.sys.Emit(ev) }, s.gateOf)
		if err != nil {
			s.lease.release()
			return nil, fmt.Errorf("session: answers: %w", err)
		}
		s.ctl = ctl
		deps := cfg.Deps
		if deps.Interviewer == nil {
			deps.Interviewer = ctl
		} else {
			deps.Interviewer = Fallback(deps.Interviewer, ctl)
		}
		cfg.Deps = deps
	}
	if reg == nil {
		if cfg.Deps.Children == nil {
			cfg.Deps.Children = &childRunner{parent: s}
		}
		reg = nodes.NewRegistry()
		err := nodes.RegisterBuiltins(reg, cfg.Deps)
		for typ, h := range cfg.Handlers {
			if err == nil {
				err = reg.Replace(nodes.Info{Type: typ, Handler: h})
			}
		}
		if err != nil {
			if s.ctl != nil {
				_ = s.ctl.Close()
			}
			s.lease.release()
			return nil, err
		}
	}
	// The session's goroutines start on its broker's kept ones (warm):
	// each grew a new goroutine's stack through its first work.
	g := goroutinesOf(cfg.Broker)
	if g == nil || !g.Go(s.eventLoop) {
		go s.eventLoop()
	}
	s.registry = reg
	acfg := actors.Config{
		SessionID: cfg.ID, Graph: cfg.Graph, Conn: nc, Registry: reg, Journal: s.timedJournal(), Middleware: cfg.Middleware,
		Contexts: s.jr.contextOf,
		// A sparse policy's crash loses the records it held, whose
		// envelopes may be out: deltas over them could not be resolved.
		WholeContexts: cfg.Durable && s.jr.policy.sparse(),
		BusHops:       cfg.BusHops,
		Threads:       threadsOf(cp),
		OnTerminal:    s.onTerminal, LogsDir: cfg.LogsDir, WorkDir: cfg.WorkDir, Clock: cfg.Clock,
		Backoff: cfg.Backoff, Logger: cfg.Logger, Restore: restore, Firings: firings,
		OnStall: func(reason string) { s.noteFailure("", scheduler.ErrStalled); s.complete("fail", reason) },
		OnFatal: func(reason string) { s.complete("fail", reason) },
		// The session sees its own events in process (other watchers read
		// them on NATS); the event loop decouples the observer.
		OnEvent:  func(ev *pb.Event) { s.events <- ev },
		Interest: cfg.Broker.Interest,
		Wants:    s.cfg.wants,
		// The answer subject's subscription above is covered by New's
		// flush, or by none.
		NoSubscribeFlush: cfg.NoSubscribeFlush,
	}
	if js := cfg.Broker.JetStream(); js != nil {
		acfg.Work = &pool.Dispatcher{NC: nc, JS: js, Storage: cfg.Broker.Storage(), Replicas: cfg.replicas(),
			Fresh: cp == nil || cfg.ForkOf != ""}
	}
	if cfg.Durable {
		js := cfg.Broker.JetStream()
		crash.Point("create-bucket") // claim made the bucket and wrote the owner's mark (a new session's work stream was made meanwhile)
		if cp == nil || cfg.ForkOf != "" {
			// A new session may not take the id of one the store holds
			// (claim refused an archived one; a bucket it made holds
			// nothing). What an interrupted start left under the id (no
			// record of the session itself) is written over.
			if !s.lease.made {
				if _, err := ReadMeta(context.Background(), cfg.Broker, cfg.ID); err == nil {
					early.drop(cfg)
					s.closeEvents()
					return nil, fmt.Errorf("session: %s already exists in the store: resume it (switchyard resume %s) or choose another id", cfg.ID, cfg.ID)
				}
			}
			s.created = true
		}
		opts := []broker.Option{broker.Replicas(cfg.replicas()), broker.Inbound(actors.InboundSubjects(cfg.ID, cfg.Graph)),
			broker.Duplicates(cfg.Broker.DuplicateWindow())}
		if s.created {
			opts = append(opts, broker.Fresh())
		}
		if cfg.late && cp == nil {
			// A new pipeline: its input and hops are handed in process,
			// so its work stream is made when outside input first comes,
			// or when it is left unfinished (actors.Config.MakeStream).
			st, n, dupes := cfg.Broker.Storage(), cfg.replicas(), cfg.Broker.DuplicateWindow()
			acfg.MakeStream = func(ctx context.Context, subjects broker.Option) error {
				return broker.Retry(ctx, 10*time.Second, func(ctx context.Context) error {
					_, err := broker.EnsureSessionStream(ctx, js, cfg.ID, st, broker.Replicas(n), broker.Duplicates(dupes), subjects)
					return err
				})
			}
		} else {
			work, cons, err := early.result()
			if work == nil && err == nil {
				// Not made early, or it existed (left by an interrupted
				// start: written over here).
				work, err = broker.EnsureSessionStream(context.Background(), js, cfg.ID, cfg.Broker.Storage(), opts...)
			}
			if err != nil {
				s.closeEvents()
				return nil, fmt.Errorf("session: stream: %w", err)
			}
			acfg.Consumer = cons
			if info := work.CachedInfo(); info != nil {
				if info.State.Consumers == 0 {
					acfg.NoConsumer = true // just made, or left without one
				}
				acfg.StreamSubjects = info.Config.Subjects
			}
		}
		// The embedded server dies with the process: the consumer's state
		// is not worth files (actors.Config.ConsumerMemory).
		acfg.ConsumerMemory = cfg.Broker.Embedded()
		acfg.MaxHeld = cfg.Broker.MaxHeld()
		crash.Point("create-stream")
		s.jr.kv, s.jr.js, s.jr.fence, s.jr.token = s.lease.bucket, js, s.lease.fence, s.lease.owner.Token
		s.jr.acks.pool = ackPoolOf(cfg.Broker) // the inbox of a journal before, kept (ackinbox.go)
		s.jr.goroutines = g
		acfg.IDKey = s.lease.idKey
		acfg.JetStream, acfg.Consume, acfg.Consumed, acfg.Storage = js, true, consumed, cfg.Broker.Storage()
		acfg.Storing = func(node string, firing uint64) { // artifact retention (artifact_retention.go)
			s.artifacts.Store(true)
			s.jr.storing(node, firing)
		}
		// Its dead-letter stream is made on its first refusal.
		st, n := cfg.Broker.Storage(), cfg.replicas()
		acfg.DeadLetters = func(ctx context.Context) error {
			s.deadLetters.Store(true)
			return broker.Retry(ctx, 10*time.Second, func(ctx context.Context) error {
				_, err := broker.EnsureDeadLetters(ctx, js, cfg.ID, st, broker.Replicas(n))
				return err
			})
		}
		if cp != nil && cfg.ForkOf == "" {
			acfg.Floors = map[string]uint64{}
			for k, v := range cp.Floors {
				acfg.Floors[k] = v
			}
		}
	}
	if acfg.Work != nil && acfg.Work.Fresh && hasPoolNodes(cfg.Graph) {
		// A new session: jobs an earlier session of the same id left
		// queued must not run beside it (a failure here is tried again
		// before its first job).
		fctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := acfg.Work.Forget(fctx, cfg.ID); err != nil {
			cfg.Logger.Warn("session: earlier jobs under this id", "session", cfg.ID, "err", err)
		}
		cancel()
	}
	if cp != nil {
		pending, err := s.jr.restore(cp)
		if err != nil {
			s.closeEvents()
			return nil, err
		}
		s.resumed = pending
	}
	if s.ctl != nil {
		acfg.Asking = s.ctl.Asking
	}
	if acfg.IDKey == nil {
		acfg.IDKey = actors.NewIDKey()
	}
	if g != nil {
		acfg.Go = g.Go
	}
	s.work = acfg.Work
	if acfg.Work != nil {
		// Outcome subjects no one outside the session can name (a durable
		// session's key is its own and outlives its owner).
		acfg.Work.Key = acfg.IDKey
	}
	starting := cfg.early // a new pipeline's start (cfg.late)
	if s.jr.kv == nil {
		starting = nil // not durable here: recorded after, as before
	}
	if starting != nil {
		if err := s.sendEarlyStart(starting, acfg.IDKey); err != nil {
			s.closeEvents()
			return nil, err
		}
	}
	sys, err := actors.New(acfg)
	if err != nil {
		if starting != nil {
			// Sent: read back, and what it recorded removed.
			_ = s.jr.finishStart(starting.t)
			s.unstarted = true
			s.closeEvents()
			s.removeUnstarted()
			return nil, err
		}
		s.closeEvents()
		return nil, err
	}
	s.sys = sys
	s.sysLive.Store(sys)
	s.jr.schedSnap = func() *scheduler.Snapshot { snap := sys.Scheduler().Snapshot(); return &snap }
	s.jr.schedOf = func(node string) *scheduler.Snapshot { snap := sys.Scheduler().SnapshotOf(node); return &snap }
	s.jr.schedCount = sys.Scheduler().CountOf
	s.jr.inbound = func() []string { return actors.InboundSubjects(cfg.ID, sys.Graph()) }
	if cfg.Durable {
		s.sweep = newSweeper(cfg.Broker.JetStream(), cfg.ID, s.jr, cfg.Logger.Warn)
	}
	s.jr.onSaved = func(saved []savedRecord) {
		// One a record: not built when nobody would see it (Emit would
		// drop it), as a firing's own events (actors.System.Wanted). Asked
		// once for the records a write stored, as the System's event
		// goroutine asks once for the events queued: each was stored
		// before the answer (two subscription lookups a record were ~0.7%
		// of a durable ingest's CPU).
		announce := s.sys.Wanted("checkpoint.saved")
		for _, r := range saved {
			if announce {
				s.sys.EmitWanted(&pb.Event{Kind: "checkpoint.saved", Node: r.node,
					Attrs: []*pb.KV{{Key: "checkpoint", Value: strconv.FormatUint(r.seq, 10)}}})
			}
			if s.sweep != nil {
				s.sweep.committed(r.seq)
			}
		}
	}
	if s.lease != nil {
		s.lease.renew(s.leaseLost)
	}
	// The journal is wired: durable nodes may receive now, and a schedule
	// node fires the tick it missed while nobody ran the session.
	if err := sys.StartConsuming(); err != nil {
		if starting != nil {
			_ = s.jr.finishStart(starting.t) // before Stop, which flushes the journal
			s.abandon()
			return nil, fmt.Errorf("session: %w", err)
		}
		s.Stop()
		return nil, fmt.Errorf("session: %w", err)
	}
	sys.CatchUp()
	return s, nil
}

// ID returns the session id.
func (s *Session) ID() string { return s.id }

// EndContext is, for a session resumed after its journal recorded its
// end (a run whose caller stopped waiting just after its last firing was
// stored), the run context at that end; nil otherwise. Nothing runs again
// in such a session, so this is where its result is.
func (s *Session) EndContext() map[string]string { return s.endedAt }

// timedJournal is the journal the actors commit to: timed by
// Config.OnJournalWrite when it is set.
func (s *Session) timedJournal() actors.Journal {
	hook := s.cfg.OnJournalWrite
	if hook == nil {
		return s.jr
	}
	return timedJournal{jr: s.jr, clk: s.cfg.Clock, hook: hook}
}

// timedJournal times each commit, from its call to its record stored.
type timedJournal struct {
	jr   *journal
	clk  clock.Clock
	hook func(time.Duration, error)
}

func (t timedJournal) Commit(ctx context.Context, c *actors.Commit) error {
	start := t.clk.Now()
	err := t.jr.Commit(ctx, c)
	t.hook(t.clk.Now().Sub(start), err)
	return err
}

func (t timedJournal) KeepsContext() bool { return t.jr.KeepsContext() }

func (t timedJournal) CommitAsync(ctx context.Context, c *actors.Commit, done func(error)) {
	start := t.clk.Now()
	t.jr.CommitAsync(ctx, c, func(err error) {
		t.hook(t.clk.Now().Sub(start), err)
		done(err)
	})
}

// System returns the session's actor system (for triggers and tests).
func (s *Session) System() *actors.System { return s.sys }

func (s *Session) clock() clock.Clock { return s.cfg.Clock }

// onTerminal is called by a node actor when a token's path ends.
func (s *Session) onTerminal(node string, t *actors.Terminal) {
	if t != nil && t.Status == "fail" {
		cause := t.Cause
		if cause == nil {
			cause = CauseError(t.ChildCause) // a child pipeline's cause goes up
		}
		s.noteFailure(strings.Join(append([]string{node}, t.Path...), "/"), cause)
	}
	if done, status, reason := s.jr.done(); done {
		s.complete(status, reason)
	}
}

// complete publishes session.completed once; the event loop closes done
// when it sees it, so every earlier event has been observed by then.
func (s *Session) complete(status, reason string) {
	s.finish.Do(func() {
		ev := &pb.Event{Kind: "session.completed", Status: status, Message: reason,
			DurationMs: s.clock().Now().Sub(s.started).Milliseconds()}
		if status == "fail" {
			s.failMu.Lock()
			if s.failNode != "" {
				ev.Attrs = append(ev.Attrs, &pb.KV{Key: "failed_node", Value: s.failNode})
			}
			if c := CauseCode(s.failCause); c != "" {
				ev.Attrs = append(ev.Attrs, &pb.KV{Key: "cause", Value: c})
			}
			s.failMu.Unlock()
		}
		s.sys.Emit(ev)
	})
}

// noteFailure remembers the first failure that ends the run.
func (s *Session) noteFailure(node string, cause error) {
	s.failMu.Lock()
	defer s.failMu.Unlock()
	if s.failNode == "" && s.failCause == nil {
		s.failNode, s.failCause = node, cause
	}
}

// Cause codes: the cause attribute of a failed session.completed event.
const (
	CauseBudgetExceeded = "budget_exceeded" // scheduler.ErrBudgetExceeded
	CauseMaxIterations  = "max_iterations"  // scheduler.ErrMaxIterations
	CauseStalled        = "stalled"         // scheduler.ErrStalled
	CauseTimeout        = "timeout"         // context.DeadlineExceeded: a node's timeout
)

// CauseCode is the cause code of err ("" when it is none of them).
func CauseCode(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, scheduler.ErrBudgetExceeded):
		return CauseBudgetExceeded
	case errors.Is(err, scheduler.ErrMaxIterations):
		return CauseMaxIterations
	case errors.Is(err, scheduler.ErrStalled):
		return CauseStalled
	case errors.Is(err, context.DeadlineExceeded):
		return CauseTimeout
	}
	return ""
}

// CauseError is the error a cause code stands for (nil for "" or an
// unknown code).
func CauseError(code string) error {
	switch code {
	case CauseBudgetExceeded:
		return scheduler.ErrBudgetExceeded
	case CauseMaxIterations:
		return scheduler.ErrMaxIterations
	case CauseStalled:
		return scheduler.ErrStalled
	case CauseTimeout:
		return context.DeadlineExceeded
	}
	return nil
}

// wants tells which event kinds the session's event loop needs: the
// report's, and the Observer's (actors.Config.Wants).
// sessionEvents is how many events wait between the System's event
// goroutine and the session's (eventLoop). The System's own queue (8,192
// events) is what absorbs a burst; this one was 4,096 events, 32 KB made
// at every start, an eighth of the bytes a 10-node pipeline's Run
// allocated.
const sessionEvents = 256

func (cfg *Config) wants(kind string) bool {
	switch {
	case kind == "node.completed" || kind == "session.completed":
		return true
	case cfg.Observer == nil:
		return false
	}
	return cfg.ObserverWants == nil || cfg.ObserverWants(kind)
}

func (s *Session) eventLoop() {
	defer close(s.loopDone)
	completed := false
	for ev := range s.events {
		if completed {
			// The run is over: stragglers (a redelivery recognised as a
			// duplicate, a late stop) are on NATS, not in the report.
			continue
		}
		s.report.observe(ev)
		if s.cfg.Observer != nil {
			s.cfg.Observer(ev)
		}
		completed = ev.Kind == "session.completed"
		if ev.Kind == "session.completed" {
			select {
			case <-s.done:
			default:
				close(s.done)
			}
		}
	}
}

// Done is closed when the session has completed and every one of its
// events has been delivered to the Observer.
func (s *Session) Done() <-chan struct{} { return s.done }

// Wait blocks until the session completes or ctx ends, then stops it and
// returns its report.
func (s *Session) Wait(ctx context.Context) (*Report, error) {
	select {
	case <-s.done:
	case <-ctx.Done():
		s.Stop()
		return s.report.result(), ctx.Err()
	}
	s.Stop()
	return s.report.result(), nil
}

// Stop cancels running handlers, stops the actors and the event loop. The
// checkpoint on disk stays as the last firing left it. Idempotent.
func (s *Session) Stop() {
	s.stopOnce.Do(func() {
		if s.sweep != nil {
			s.sweep.stop()
		}
		if s.sys != nil {
			select {
			case <-s.done:
			default:
				if s.placed {
					break
				}
				if s.handedOver.Load() {
					s.sys.Emit(&pb.Event{Kind: "session.moved", Message: "handed over to another member of the deployment"})
					break
				}
				// Watchers learn that a session that did not complete stopped.
				s.sys.Emit(&pb.Event{Kind: "session.stopped", Message: "stopped before completing"})
			}
			s.listInbound()
			s.sys.Stop()
			if err := s.jr.flush(); err != nil {
				s.cfg.Logger.Warn("session: writing the last checkpoint records", "session", s.id, "err", err)
			}
		}
		// What the session published for others is at the server when Stop
		// returns. A session that published nothing anyone reads (no one
		// subscribed to its events) and acknowledged nothing (no work
		// stream, hence no consumer: a durable pipeline that got no
		// outside input) has nothing there to wait for: a round trip, 2–4%
		// of a 10-node pipeline's Run. Its journal's records were each
		// acknowledged by the server.
		if s.sys == nil || s.sys.PublishedForOthers() || (s.cfg.Durable && s.sys.StreamMade()) {
			_ = s.cfg.Broker.Conn().Flush()
		}
		s.releaseFinished()
		if s.lease != nil && s.removed() {
			// Its store goes (cleanup): the lease is purged, not deleted
			// (no marker left), once the store is removed — in the
			// background with the removal, for a session in the shared
			// bucket (remover).
			s.lease.purge = true
			s.leaseLater = true
		}
		s.closeEvents()
		s.cleanup()
	})
}

// listInbound makes the work stream of a new pipeline that did not
// complete (made without one, Config.late) list its inbound subjects
// before its process lets go of it: outside input is then stored while
// nobody serves it. A failure leaves it to the resume, which lists them
// at its start.
func (s *Session) listInbound() {
	if !s.cfg.late || s.placed || s.leaseGone.Load() {
		return
	}
	select {
	case <-s.done:
		return // completed: its work stream goes (releaseFinished, cleanup)
	default:
	}
	if err := s.sys.ListInbound(); err != nil {
		s.cfg.Logger.Warn("session: listing the inbound subjects of its work stream", "session", s.id, "err", err)
	}
}

// releaseFinished gives up what a session that is over (completed, or
// stopped by its operator) no longer needs, while this process still holds
// its lease: its durable consumer and an empty dead-letter stream (see
// releaseFinished in retention.go).
func (s *Session) releaseFinished() {
	if !s.cfg.Durable {
		select {
		case <-s.done:
			// Completed: the outcomes of its pool jobs are not needed
			// (a resume of a completed session runs nothing).
			if s.sys != nil && s.cfg.Broker.JetStream() != nil && hasPoolNodes(s.sys.Graph()) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := pool.ForgetOutcomes(ctx, s.cfg.Broker.JetStream(), s.id); err != nil {
					s.cfg.Logger.Warn("session: purging the outcomes of a finished session", "session", s.id, "err", err)
				}
			}
		default:
		}
		return
	}
	if s.leaseGone.Load() {
		return
	}
	completed := false
	select {
	case <-s.done:
		completed = true
	default:
		if !s.ended.Load() {
			return // interrupted: a resume continues it
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if completed && s.removed() {
		// Its whole store goes next (cleanup), consumer and dead letters
		// with it: only the outcomes of its pool jobs lie outside it —
		// none when it was made here and sent no job (what an earlier
		// session of its id left ages out, pool.MaxOutcomeAge): a round
		// trip fewer at the end of most runs.
		if s.created && s.work != nil && !s.work.Prepared() {
			return
		}
		if err := pool.ForgetOutcomes(ctx, s.cfg.Broker.JetStream(), s.id); err != nil {
			s.cfg.Logger.Warn("session: purging the outcomes of a finished session", "session", s.id, "err", err)
		}
		return
	}
	if err := releaseFinished(ctx, s.cfg.Broker, s.id, completed); err != nil {
		s.cfg.Logger.Warn("session: releasing the consumer of a finished session", "session", s.id, "err", err)
	}
}

// removed reports whether cleanup will remove the durable session's store:
// it succeeded and its checkpoint policy does not retain it.
func (s *Session) removed() bool {
	if !s.cfg.Durable || !s.jr.cleanup {
		return false
	}
	_, status, _ := s.jr.done()
	return status == "success"
}

// cleanup removes a durable session's store (stream, checkpoints,
// artifacts) when it succeeded and its checkpoint policy does not retain it.
func (s *Session) cleanup() {
	release := func() {} // the lease: released by closeEvents
	if s.leaseLater {
		release = s.lease.release // after the removal
	}
	if !s.removed() || s.report.result().Status != "success" {
		release()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	var known []broker.DeleteOption
	if s.jr.kv != nil && s.jr.kv.Shared() {
		var st jetstream.Stream
		if s.prepared != nil {
			st = s.prepared.bgStream() // removed through the background's connection
		} else if s.sharedIn != nil {
			st = s.sharedIn.stream(s.cfg.Broker)
		}
		known = append(known, broker.SharedBucketOnly(st))
		if s.prepared == nil {
			// A named pipeline: its keys were likely the bucket's last
			// writes (a prepared store's are written after the session
			// that took the one before it).
			known = append(known, broker.AnchorShared())
		}
	} else if s.created {
		known = append(known, broker.OwnBucketOnly()) // made here, of its own
	}
	if s.created {
		known = append(known, broker.NotArchived()) // made here, run to its end here
		if !s.deadLetters.Load() {
			known = append(known, broker.NoDeadLetters()) // made here before a first one, and none came
		}
		if s.sys != nil && !s.sys.StreamMade() {
			known = append(known, broker.NoWorkStream()) // made without one, and no outside input came
		}
		// The runtime makes no event stream (a client's is the client's);
		// and the object store is made by a replicated session's claim, by
		// the first artifact stored — by a node here, by a pool job's
		// worker, or uploaded with an outside envelope (which comes through
		// the work stream; an upload whose envelope never came leaves one
		// to gc): two requests of each removal, a third of its time, which
		// the next Runs' writes wait behind on the server.
		known = append(known, broker.NoEventStream())
		if s.cfg.replicas() == 1 && !s.artifacts.Load() && (s.work == nil || !s.work.Prepared()) && s.sys != nil && !s.sys.StreamMade() {
			known = append(known, broker.NoObjects())
		}
	}
	if s.lease != nil {
		known = append(known, broker.LeaseLeft()) // released after, purged
	}
	remove := func() {
		js := s.cfg.Broker.JetStream()
		if s.prepared != nil {
			js = s.prepared.js() // the background's connection
		}
		if err := broker.DeleteSession(ctx, js, s.id, known...); err != nil {
			s.cfg.Logger.Warn("session: removing the store of a successful session", "session", s.id, "err", err)
		}
		release()
	}
	if p := s.remover(); p != nil && p.removeLater(s.id, func() {
		defer cancel()
		remove()
	}) {
		return // in the background: the broker's Close waits for it
	}
	defer cancel()
	remove()
}

// remover is the preparer that removes the session's store in the
// background once it succeeded, with its lease held until then: the one
// that made its store, or whose shared bucket a named pipeline was placed
// in. nil: removed by Stop. The caller does not wait for the removal (half
// a named 10-node pipeline's Run, on its critical path before: a purge of
// the shared bucket and three requests). A later claim of the id in this
// process waits for it (claimThen); another process finds the lease held
// until it is done, as while the session ran.
func (s *Session) remover() *preparer {
	if s.prepared != nil {
		return s.prepared
	}
	return s.sharedIn
}

func (s *Session) closeEvents() {
	if s.ctl != nil {
		_ = s.ctl.Close()
	}
	close(s.events)
	<-s.loopDone
	if !s.leaseLater && !s.unstarted {
		s.lease.release()
	}
	s.unhold()
}

// leaseLost ends a session another process took over: it can write
// nothing any more (its journal is fenced), so it stops working here.
func (s *Session) leaseLost(err error) {
	s.leaseGone.Store(true)
	s.sys.Emit(&pb.Event{Kind: "session.lease_lost", Message: err.Error()})
	s.complete("fail", err.Error())
}

// Report returns the report so far.
func (s *Session) Report() *Report { return s.report.result() }

// absDir is dir made absolute (as recorded in a durable session's meta,
// for a resume from another directory); "" stays "".
func absDir(dir string) string {
	if dir == "" {
		return ""
	}
	if a, err := filepath.Abs(dir); err == nil {
		return a
	}
	return dir
}

func (s *Session) writeManifest() error {
	if s.cfg.LogsDir == "" {
		return nil
	}
	m := map[string]any{"name": s.cfg.Graph.Name, "goal": s.cfg.Graph.Goal(), "session_id": s.id,
		"start_time": s.clock().Now().UTC().Format(time.RFC3339Nano)}
	data, _ := json.MarshalIndent(m, "", "  ")
	return os.WriteFile(filepath.Join(s.cfg.LogsDir, "manifest.json"), data, 0o644)
}

// initialContext mirrors the graph's attributes as graph.* keys (the spec's
// graph.goal among them) and adds the caller's keys.
// threadsOf are the agent threads a checkpoint's context holds.
func threadsOf(cp *Checkpoint) map[string]string {
	if cp == nil {
		return nil
	}
	out := map[string]string{}
	for k, v := range cp.Context {
		if strings.HasPrefix(k, nodes.ThreadKeyPrefix) {
			out[k] = v
		}
	}
	return out
}

func initialContext(cfg Config) map[string]string {
	ctx := map[string]string{}
	for _, k := range cfg.Graph.Attrs.Keys() {
		ctx["graph."+k] = cfg.Graph.Attrs.String(k)
	}
	ctx["graph.goal"] = cfg.Graph.Goal()
	for k, v := range cfg.Context {
		ctx[k] = v
	}
	return ctx
}

func kvs(m map[string]string) []*pb.KV {
	out := make([]*pb.KV, 0, len(m))
	for _, k := range sortedKeys(m) {
		out = append(out, &pb.KV{Key: k, Value: m[k]})
	}
	return out
}

// hasPoolNodes reports whether g sends any node's firings to workers.
func hasPoolNodes(g *graph.Graph) bool {
	for _, n := range g.Nodes {
		if pool.Of(n) != "" {
			return true
		}
	}
	return false
}

// earlyStream is a new durable session's work stream and its consumer,
// made while its bucket is (claimThen): the two are independent, and their
// round trips overlap. Only a stream that does not exist is made
// (broker.CreateOnly): one left by an interrupted start is written over
// after the checks, as before.
type earlyStream struct {
	done    chan struct{} // closed when made (nil: not started)
	made    bool          // the stream was made here
	st      jetstream.Stream
	cons    jetstream.Consumer
	err     error
	existed bool
}

// start makes the stream and the consumer on a goroutine that result or
// drop waits for.
func (e *earlyStream) start(cfg Config) {
	e.done = make(chan struct{})
	go func() {
		defer close(e.done)
		js := cfg.Broker.JetStream()
		subjects := broker.Inbound(actors.InboundSubjects(cfg.ID, cfg.Graph))
		st, err := broker.EnsureSessionStream(context.Background(), js, cfg.ID, cfg.Broker.Storage(), broker.CreateOnly(),
			broker.Replicas(cfg.replicas()), subjects, broker.Duplicates(cfg.Broker.DuplicateWindow()))
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			e.existed = true
			return
		}
		if err != nil {
			e.err = err
			return
		}
		e.st, e.made = st, true
		crash.Point("create-stream-early") // the stream made, the bucket perhaps not yet
		e.cons, e.err = actors.NewConsumer(context.Background(), js, cfg.ID, cfg.Broker.Embedded(), cfg.Broker.MaxHeld())
	}()
}

// wait waits for the stream and its consumer to be made (or not).
func (e *earlyStream) wait() {
	if e != nil && e.done != nil {
		<-e.done
	}
}

// result is the stream and its consumer, once waited for: nil, nil, nil
// when it was not made here (not started, or the stream existed).
func (e *earlyStream) result() (jetstream.Stream, jetstream.Consumer, error) {
	if e == nil || e.done == nil {
		return nil, nil, nil
	}
	<-e.done
	if e.existed {
		return nil, nil, nil
	}
	return e.st, e.cons, e.err
}

// drop waits for the stream and removes it when it was made here: the
// session is not made after all (its id is taken, or its claim failed).
func (e *earlyStream) drop(cfg Config) {
	if e == nil || e.done == nil {
		return
	}
	<-e.done
	if !e.made {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cfg.Broker.JetStream().DeleteStream(ctx, broker.StreamName(cfg.ID)); err != nil && cfg.Logger != nil {
		cfg.Logger.Warn("session: removing the work stream of a session not made", "session", cfg.ID, "err", err)
	}
}
