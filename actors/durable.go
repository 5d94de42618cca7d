package actors

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard/switchyard/broker"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// Durable consumption. In a durable session (Config.Consume) the nodes do
// not subscribe to their subjects on core NATS: the session reads every
// edge subject and node inbox from its JetStream stream through one durable
// consumer, with explicit acknowledgement, and hands each envelope to the
// actor of the node that reads its subject (one consumer per session, not
// per node: a graph of any size costs one consumer, and JetStream's consumer
// limit never caps the graph). An envelope is acknowledged only once the
// firing that consumed it is committed to the journal and the envelopes it
// produced are handed over (handOver: in process to the nodes of the
// session, the journal holding them as pending), so a crash at any
// point leaves it unacknowledged and it is delivered again after the
// restart. Envelopes already consumed before the crash are recognised by
// their ids (Config.Consumed, from the checkpoint) or lie at or below their
// node's acknowledgement floor (Config.Floors), and are acknowledged
// without reaching the node again.

// consumerAckWait is how long an envelope may wait unacknowledged in a
// running process before JetStream delivers it again. Envelopes wait in
// buffers, joins and manual gates for as long as the graph says, so the
// running process never relies on redelivery: a restart re-creates the
// consumer from its acknowledgement floor instead, and so does a running
// process that lost a delivery on the way (resync.go).
const consumerAckWait = 365 * 24 * time.Hour

// ConsumerName is the session's durable consumer on its stream.
const ConsumerName = "nodes"

const consumerName = ConsumerName

// route is where envelopes on one subject go.
type route struct {
	node string
	pid  *actor.PID
}

// setRoute makes envelopes on subj reach node's actor.
func (s *System) setRoute(subj, node string, pid *actor.PID) {
	s.routeMu.Lock()
	s.routes[subj] = route{node: node, pid: pid}
	s.routeMu.Unlock()
}

// dropRoute stops envelopes on subj reaching any node.
func (s *System) dropRoute(subj string) {
	s.routeMu.Lock()
	delete(s.routes, subj)
	s.routeMu.Unlock()
}

// dropRoutesTo removes every route to node (a node removed by a live edit).
func (s *System) dropRoutesTo(node string) {
	s.routeMu.Lock()
	for subj, r := range s.routes {
		if r.node == node {
			delete(s.routes, subj)
		}
	}
	s.routeMu.Unlock()
}

// createConsumer creates (or, after a restart, re-creates from the lowest
// acknowledgement floor of the graph's nodes) the session's consumer over
// its work stream (consumerConfig).
func (s *System) createConsumer() error {
	if s.cfg.Consumer != nil {
		s.mu.Lock()
		s.consumer = s.cfg.Consumer
		s.mu.Unlock()
		return nil
	}
	return s.makeConsumer(s.ctx, s.restartStart(), !s.cfg.NoConsumer)
}

// restartStart is the stream sequence a new consumer starts at: after a
// restart, just above the lowest floor of the graph's nodes (everything
// above it is delivered again at once; what a node acknowledged — at or
// below its own floor, or consumed by id — is acknowledged again without
// reaching it, what it did not reaches it); 0 at a session's start (the
// whole stream).
func (s *System) restartStart() uint64 {
	if s.cfg.Floors == nil {
		return 0
	}
	low := uint64(0)
	for i, n := range s.graph().Nodes {
		if f := s.cfg.Floors[n.ID]; i == 0 || f < low {
			low = f
		}
	}
	return low + 1
}

// consumerConfig is the session's consumer, delivering from stream
// sequence start (0: from the first), its state in the server's memory
// with memory (Config.ConsumerMemory), up to maxHeld deliveries
// unacknowledged (Config.MaxHeld; 0: broker.DefaultMaxHeld).
//
// It reads the whole work stream, without a filter: the stream stores
// nothing but the session's inboxes and edges and their Stored subjects
// (broker.WorkSubjects: listed, or the Stored wildcard, or both while the
// mode changes), so what it stored before a change of mode is delivered
// after it, and a subject no node reads is refused (deliverDurable). A
// filter of those subjects gained nothing and made the server look up
// every next message through its multi-filter path (LoadNextMsgMulti:
// 3% of the CPU of durable ingest through the intake).
func consumerConfig(session string, start uint64, memory bool, maxHeld int) jetstream.ConsumerConfig {
	cfg := jetstream.ConsumerConfig{
		Durable:       consumerName,
		Description:   "switchyard session " + session,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       consumerAckWait,
		MaxDeliver:    -1,
		MaxAckPending: cmp.Or(maxHeld, broker.DefaultMaxHeld),
		DeliverPolicy: jetstream.DeliverAllPolicy,
		MemoryStorage: memory,
	}
	if start > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, start
	}
	return cfg
}

// ConsumeLike is how a session consumes its work stream (consumerConfig,
// consume) for a consumer named durable, its state in the server's memory
// with memory: for a baseline that must consume a stream the way a
// session does (internal/benchmark's JetStream consume+ack).
func ConsumeLike(durable string, memory bool) (jetstream.ConsumerConfig, []jetstream.PullConsumeOpt) {
	cfg := consumerConfig("", 0, memory, 0)
	cfg.Durable, cfg.Description = durable, ""
	return cfg, pullOpts()
}

// pullOpts are the pull options of a session's consumer.
func pullOpts() []jetstream.PullConsumeOpt {
	return []jetstream.PullConsumeOpt{jetstream.PullExpiry(pullExpiry), jetstream.PullHeartbeat(pullHeartbeat),
		jetstream.PullMaxMessages(pullBatch)}
}

// NewConsumer creates a new session's consumer on its work stream, just
// made and without one, before the session's System exists (so that the
// round trip overlaps the rest of the session's making): what New would
// make for it, given to New as Config.Consumer. memory is
// Config.ConsumerMemory, maxHeld Config.MaxHeld. Nothing is delivered
// before StartConsuming.
func NewConsumer(ctx context.Context, js jetstream.JetStream, session string, memory bool, maxHeld int) (jetstream.Consumer, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var cons jetstream.Consumer
	err := broker.Retry(ctx, 10*time.Second, func(ctx context.Context) error {
		var err error
		cons, err = js.CreateConsumer(ctx, broker.StreamName(session), consumerConfig(session, 0, memory, maxHeld))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("actors: consumer %s: %w", consumerName, err)
	}
	return cons, nil
}

// makeConsumer deletes the session's consumer if it exists (unless
// exists is false: the stream has none) and creates it again, delivering
// from stream sequence start (0: from the first). Its state is kept in
// the server's memory with Config.ConsumerMemory.
func (s *System) makeConsumer(ctx context.Context, start uint64, exists bool) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	js, stream := s.cfg.JetStream, broker.StreamName(s.cfg.SessionID)
	cfg := consumerConfig(s.cfg.SessionID, start, s.cfg.ConsumerMemory, s.cfg.MaxHeld)
	// Riding through a cluster that is still electing leaders (a server
	// just restarted): JetStream is briefly unavailable.
	if exists {
		err := broker.Retry(ctx, 10*time.Second, func(ctx context.Context) error {
			if err := js.DeleteConsumer(ctx, stream, consumerName); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
				return err
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("actors: consumer %s: %w", consumerName, err)
		}
	}
	var cons jetstream.Consumer
	err := broker.Retry(ctx, 10*time.Second, func(ctx context.Context) error {
		var err error
		cons, err = js.CreateConsumer(ctx, stream, cfg)
		return err
	})
	if err != nil {
		return fmt.Errorf("actors: consumer %s: %w", consumerName, err)
	}
	s.mu.Lock()
	s.consumer = cons
	s.mu.Unlock()
	return nil
}

// A pull request lives pullExpiry on the server and is kept alive by
// heartbeats every pullHeartbeat: a pull lost with a server (a restart, a
// consumer leader elected elsewhere) is noticed after two missing
// heartbeats and made again, in seconds (nats.go's defaults, 30 s and
// 15 s, left a restarted stream unread for ~25 s). Idle, a consumer costs
// one heartbeat every 2 s and a pull every 10 s.
//
// A pull asks for up to pullBatch messages and is renewed once half of
// them arrived (nats.go's threshold). nats.go skips the renewal while its
// previous pull is still being sent (its fetchInProgress flag): when every
// message still asked for arrives meanwhile — its goroutine waiting on the
// busy connection of a loaded machine — no pull is left on the server, and
// the feed stops until the missing heartbeats make nats.go pull again
// (2 × pullHeartbeat). With nats.go's default of 500 (renewed at 250 left)
// a durable ingest of 100,000 events stalled so in 8 runs of 21, the
// consumer reporting no pull waiting and 10,000 messages pending for 4 s;
// with 2,000 (renewed at 1,000 left: tens of milliseconds of deliveries)
// in none of 19. The server delivers no more than is stored; a larger pull
// only lets more of it wait in the process's buffers.
const (
	pullExpiry    = 10 * time.Second
	pullHeartbeat = 2 * time.Second
	pullBatch     = 2000
)

// StartConsuming lets the nodes of a durable session receive: until then
// the session's consumer exists but delivers nothing, so the session can
// finish wiring itself (a resume delivers at once what was pending). It
// starts the watch that re-creates the consumer after a lost delivery
// (resync.go).
func (s *System) StartConsuming() error {
	s.mu.Lock()
	s.consuming = true
	s.mu.Unlock()
	return s.startFeed()
}

// startFeed starts the consumer's feed once the session consumes
// (StartConsuming) and has a consumer (a stream made late has one only
// then: lazy.go); whichever of the two comes last starts it, once.
func (s *System) startFeed() error {
	s.mu.Lock()
	cons := s.consumer
	if cons == nil || !s.consuming || s.feedMade || s.consumeEnded {
		s.mu.Unlock()
		return nil
	}
	s.feedMade = true
	s.mu.Unlock()
	f, err := s.consume(cons, 0)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(s.ctx)
	done := make(chan struct{})
	s.mu.Lock()
	if s.consumeEnded {
		s.mu.Unlock()
		cancel()
		f.stop()
		return nil
	}
	s.feed = f
	s.watch.cancel, s.watch.done = cancel, done
	s.mu.Unlock()
	go s.watchConsumer(ctx, done) // ended by stopConsuming
	return nil
}

// stopConsuming ends the session's consumption for good (Stop, Quiesce).
func (s *System) stopConsuming() {
	s.mu.Lock()
	s.consumeEnded = true
	cancel, done := s.watch.cancel, s.watch.done
	s.watch.cancel, s.watch.done = nil, nil
	s.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	s.mu.Lock()
	f := s.feed
	s.feed = nil
	s.mu.Unlock()
	if f != nil {
		f.stop()
	}
}

// deliverDurable is deliver for a JetStream message: it runs on the
// consumer's goroutine and hands the envelope to the actor of the node
// that reads its subject. seq is its stream sequence (ackSeqs; 0: not
// known).
func (s *System) deliverDurable(m jetstream.Msg, seq uint64) {
	// Once it is handed on (or refused), whatever a node hands over in
	// process comes after it (handOver).
	defer raise(&s.fed, seq)
	r, ok := s.routeOf(m.Subject())
	if !ok {
		// No node reads it (an edge or node a live edit removed, or a
		// subject of no node at all): the stray watcher refuses it
		// visibly (intake, stray); the consumer lets it go, and the
		// work stream does not keep it (nothing would ever trim it).
		_ = m.Term()
		s.dropStored(m)
		return
	}
	if seq != 0 && seq <= s.cfg.Floors[r.node] {
		_ = m.Ack() // acknowledged by the node before the restart
		return
	}
	pid := r.pid
	env, err := s.decoded.take(m.Headers().Get(nats.MsgIdHdr), m.Data()), error(nil)
	if env == nil {
		env, err = DecodeEnvelope(m.Data())
	}
	if err == nil {
		err = s.checkIngress(env, m.Headers().Get(HeaderOwn))
	}
	if err != nil {
		s.Emit(&pb.Event{Kind: "envelope.rejected", Message: err.Error(),
			Attrs: []*pb.KV{{Key: "subject", Value: m.Subject()}}})
		s.deadLetter(&nats.Msg{Subject: broker.DeadLetter(s.cfg.SessionID), Data: m.Data()})
		_ = m.Term()
		s.dropStored(m)
		return
	}
	if env.Id == "" {
		env.Id = m.Headers().Get(nats.MsgIdHdr)
	}
	if env.Id == "" {
		// The stream sequence names it for good: a redelivery keeps it.
		env.Id = s.ids.sign(fmt.Sprintf("%s.seq.%d", s.cfg.SessionID, seq))
	}
	if env.SessionId == "" {
		env.SessionId = s.cfg.SessionID
	}
	if c := callerFromHeaders(m.Headers()); c != nil {
		env.Caller = c
	}
	s.root.Send(pid, &delivery{edge: s.edgeOfSubject(m.Subject()), env: env, ack: m.Reply(), seq: seq})
}

// handOver hands an envelope a firing produced to the actor of the node
// that reads subj, in process, once the firing's record is stored (the
// session's nodes all live in its one owner): the envelope is not stored
// in the work stream, which keeps outside input only. The journal holds it
// as pending until the record of its consumption is stored; a resume
// publishes the pending envelopes to the work stream, as before. It
// returns false, and the envelope goes through the work stream, while the
// consumer has not handed on what the runtime stored there (a resume's
// pending envelopes), when no node reads subj (the stray watcher refuses
// it visibly) or when the envelope would be refused on arrival
// (checkEnvelope: the consumer's path refuses it as it always did).
func (s *System) handOver(subj, edge string, env *pb.Envelope) bool {
	if s.fed.Load() < s.stored.Load() {
		// An envelope the runtime stored (a resume's pending one, or one
		// left to the stream) is not handed to its node yet: this one
		// follows it through the stream, so an edge keeps its order.
		return false
	}
	r, ok := s.routeOf(subj)
	if !ok || checkEnvelope(s.cfg.SessionID, env) != nil {
		return false
	}
	// The envelope itself, not a copy: the journal's state holds it as
	// pending and may write it meanwhile, so a receiver changes a copy of
	// it (a join's missing inputs, a schedule's time: nodeActor.decided).
	s.root.Send(r.pid, &delivery{edge: edge, env: env, handed: true})
	return true
}

// raise sets v to n when n is higher.
func raise(v *atomic.Uint64, n uint64) {
	for {
		old := v.Load()
		if n <= old || v.CompareAndSwap(old, n) {
			return
		}
	}
}

// edgeOfSubject is the edge id a subject carries, an edge's or its Stored
// subject ("" for an inbox).
func (s *System) edgeOfSubject(subj string) string {
	if rest, ok := strings.CutPrefix(subj, s.storedPrefix); ok {
		subj = rest
	} else if rest, ok := strings.CutPrefix(subj, s.storedPrefix[:len(s.storedPrefix)-2]); ok {
		subj = rest
	} else {
		return ""
	}
	if id, ok := strings.CutPrefix(subj, "edge."); ok {
		return id
	}
	return ""
}

// track records a durable delivery at the node; false when its envelope
// was consumed already (acknowledged now) or is already held here (its
// acknowledgement waits for the first copy's).
func (a *nodeActor) track(m *delivery) bool {
	id := m.env.GetId()
	if m.seq != 0 && m.seq <= a.maxSeq {
		// Delivered again by a consumer re-created after a lost delivery
		// (resync.go): every message of this node's subjects up to maxSeq
		// reached it, so it holds this one or consumed it. One it holds
		// is acknowledged through the new delivery (the consumer that
		// made the first one is gone); one it consumed is acknowledged
		// again.
		if !a.unacked.has(m.seq) {
			a.s.ackHeld(m.ack)
			return false
		}
		if held, ok := a.acks[id]; ok {
			held.replace(m.seq, m.ack)
			a.acks[id] = held
		}
		return false
	}
	if a.s.consumed.has(id) {
		a.s.ackHeld(m.ack)
		a.s.Emit(&pb.Event{Kind: "envelope.duplicate", Node: a.node.ID, EdgeId: m.edge,
			Message: "envelope " + id + " was already consumed"})
		return false
	}
	if m.seq > a.maxSeq {
		a.maxSeq = m.seq
	}
	a.unacked.add(m.seq)
	a.s.holdOne()
	if held, ok := a.acks[id]; ok {
		held.more = append(held.more, heldMsg{m.ack, m.seq})
		a.acks[id] = held
		a.s.Emit(&pb.Event{Kind: "envelope.duplicate", Node: a.node.ID, EdgeId: m.edge,
			Message: "envelope " + id + " was already delivered"})
		return false
	}
	if a.acks == nil {
		a.acks = map[string]heldMsgs{}
	}
	a.acks[id] = heldMsgs{first: heldMsg{m.ack, m.seq}}
	return true
}

// ackBody is the body of a JetStream acknowledgement (what nats.go's
// jetstream.Msg.Ack publishes).
var ackBody = []byte("+ACK")

// ackHeld acknowledges the JetStream delivery whose reply subject is ack,
// on the connection of the JetStream context that made the session's
// consumer (the one its journal writes on), as jetstream.Msg.Ack would.
func (s *System) ackHeld(ack string) {
	if ack == "" || s.cfg.JetStream == nil {
		return
	}
	_ = s.cfg.JetStream.Conn().Publish(ack, ackBody)
}

// heldMsg is a JetStream delivery a node holds until its envelope is
// consumed: the reply subject it is acknowledged on, and its stream
// sequence.
type heldMsg struct {
	ack string
	seq uint64
}

// heldMsgs are the copies of one envelope a node holds: the first, and
// the ones delivered again before it was consumed (rare: the first is
// held in place, not in a list made for every envelope).
type heldMsgs struct {
	first heldMsg
	more  []heldMsg
}

// replace makes ack the reply subject of the copy of sequence seq (a new
// delivery of it).
func (h *heldMsgs) replace(seq uint64, ack string) {
	if h.first.seq == seq {
		h.first.ack = ack
	}
	for i := range h.more {
		if h.more[i].seq == seq {
			h.more[i].ack = ack
		}
	}
}

// ack acknowledges every copy, and lets their sequences go from a's
// unacknowledged ones.
func (h *heldMsgs) ack(a *nodeActor) {
	for i := -1; i < len(h.more); i++ {
		m := h.first
		if i >= 0 {
			m = h.more[i]
		}
		a.s.ackHeld(m.ack)
		a.unacked.remove(m.seq)
		a.s.releaseOne()
	}
}

// maxHeld is the most deliveries the session's nodes hold (Config.MaxHeld).
func (s *System) maxHeld() int64 { return int64(cmp.Or(s.cfg.MaxHeld, broker.DefaultMaxHeld)) }

// holdOne counts a delivery a node holds. When the count reaches the
// consumer's bound the stream delivers nothing more until some are
// consumed; the session says so once (session.held_full), and again only
// after the count fell to half the bound.
func (s *System) holdOne() {
	limit := s.maxHeld()
	if s.held.Add(1) >= limit && !s.heldFull.Swap(true) {
		s.Emit(&pb.Event{Kind: "session.held_full", Message: fmt.Sprintf(
			"the nodes hold %d envelopes unacknowledged, the session's bound (serve --max-held): the stream delivers more as they are consumed (switchyard explain %s NODE says why a node waits)", limit, s.cfg.SessionID)})
	}
}

// releaseOne counts a delivery acknowledged.
func (s *System) releaseOne() {
	if s.held.Add(-1) <= s.maxHeld()/2 && s.heldFull.Load() {
		s.heldFull.Store(false)
	}
}

// Held is how many deliveries of a durable session's consumer its nodes
// hold unacknowledged: taken by a node, waiting in its buffers or fired
// and waiting for the firing's record to be stored. It falls to zero once
// every envelope delivered so far was consumed and acknowledged (what a
// benchmark of durable ingest waits for; 0 for a session that is not
// durable).
func (s *System) Held() int64 { return s.held.Load() }

// acknowledge acknowledges consumed envelopes (after their commit). The
// acknowledgements go out on the connection the next checkpoint is written
// on, so the server has them before it has that checkpoint.
func (a *nodeActor) acknowledge(ids []string) {
	for _, id := range ids {
		held, ok := a.acks[id]
		if !ok {
			// Not from the work stream (handed over in process, a tick,
			// a session that is not durable): no copy of it there to
			// recognise.
			continue
		}
		a.s.consumed.add(id) // read by track: durable deliveries only
		held.ack(a)
		delete(a.acks, id)
	}
}

// seqsOf are the stream sequences of the first copies of envelopes held.
func (a *nodeActor) seqsOf(ids []string) []uint64 {
	return a.seqsInto(nil, ids)
}

// seqsInto is seqsOf in room's array when it has room for them (a job's).
func (a *nodeActor) seqsInto(room []uint64, ids []string) []uint64 {
	if !a.s.cfg.Consume {
		return nil
	}
	out := room[:0]
	if room == nil || cap(out) < len(ids) {
		out = make([]uint64, len(ids)) // never nil: the journal trims by it (Commit.Seqs)
	}
	out = out[:len(ids)]
	for i, id := range ids {
		out[i] = 0
		if h, ok := a.acks[id]; ok {
			out[i] = h.first.seq
		}
	}
	return out
}

// floor is the node's acknowledgement floor: every message it received
// at or below it was acknowledged. Amortised O(log n) in the envelopes
// held (seqSet), not a scan of them.
func (a *nodeActor) floor() uint64 {
	if low, ok := a.unacked.min(); ok {
		return low - 1
	}
	return a.maxSeq
}

// dropStored removes a refused message from the work stream: it is on the
// dead-letter stream (bounded) or was refused visibly, and no node's
// acknowledgement floor would ever trim it from the work stream.
func (s *System) dropStored(m jetstream.Msg) {
	md, err := m.Metadata()
	if err != nil || s.cfg.JetStream == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.workMu.Lock()
	st := s.work
	s.workMu.Unlock()
	if st == nil {
		if st, err = s.cfg.JetStream.Stream(ctx, md.Stream); err != nil {
			return
		}
		s.workMu.Lock()
		s.work = st
		s.workMu.Unlock()
	}
	_ = st.DeleteMsg(ctx, md.Sequence.Stream)
}
