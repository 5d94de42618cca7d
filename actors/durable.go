package actors

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard/switchyard/broker"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// Durable consumption. In a durable session (Config.Consume) a node does
// not subscribe to its subjects on core NATS: it reads them from the
// session's JetStream stream through a durable consumer of its own, with
// explicit acknowledgement. An envelope is acknowledged only once the
// firing that consumed it is committed to the journal and the envelopes it
// produced are published (acknowledged by JetStream), so a crash at any
// point leaves it unacknowledged and it is delivered again after the
// restart. Envelopes already consumed before the crash are recognised by
// their ids (Config.Consumed, from the checkpoint) and acknowledged
// without reaching the node again.

// consumerAckWait is how long an envelope may wait unacknowledged in a
// running process before JetStream delivers it again. Envelopes wait in
// buffers, joins and manual gates for as long as the graph says, so the
// running process never relies on redelivery: a restart re-creates the
// consumer from its acknowledgement floor instead.
const consumerAckWait = 365 * 24 * time.Hour

// maxAckPending bounds the envelopes a node holds unacknowledged.
const maxAckPending = 1 << 16

// nodeConsumer is a node's durable consumer and what it reads.
type nodeConsumer struct {
	name     string
	subjects []string
	start    func() (jetstream.ConsumeContext, error)
	cc       jetstream.ConsumeContext // nil until it starts
}

func consumerName(node string) string { return "n_" + node }

// consume starts (or, after a restart, resumes from its acknowledgement
// floor) the node's consumer over subjects.
func (s *System) consume(pid *actor.PID, node string, subjects []string) error {
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	js, stream := s.cfg.JetStream, broker.StreamName(s.cfg.SessionID)
	name := consumerName(node)
	cfg := jetstream.ConsumerConfig{
		Durable:        name,
		Description:    "switchyard node " + node,
		FilterSubjects: subjects,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        consumerAckWait,
		MaxDeliver:     -1,
		MaxAckPending:  maxAckPending,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	}
	if s.cfg.Floors != nil {
		// A restart: deliver again everything above the journal's floor at
		// once; what was consumed is recognised by id, what was not reaches
		// the node.
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, s.cfg.Floors[node]+1
	}
	// Riding through a cluster that is still electing leaders (a server
	// just restarted): JetStream is briefly unavailable.
	err := broker.Retry(ctx, 10*time.Second, func(ctx context.Context) error {
		if err := js.DeleteConsumer(ctx, stream, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("actors: consumer %s: %w", name, err)
	}
	var cons jetstream.Consumer
	err = broker.Retry(ctx, 10*time.Second, func(ctx context.Context) error {
		var err error
		cons, err = js.CreateConsumer(ctx, stream, cfg)
		return err
	})
	if err != nil {
		return fmt.Errorf("actors: consumer %s: %w", name, err)
	}
	nc := &nodeConsumer{name: name, subjects: subjects, start: func() (jetstream.ConsumeContext, error) {
		return s.startConsuming(pid, node, cons)
	}}
	s.mu.Lock()
	s.consumers[node] = nc
	started := s.consuming
	s.mu.Unlock()
	if started {
		return s.startConsumer(nc)
	}
	return nil
}

// StartConsuming lets the nodes of a durable session receive: until then
// their consumers exist but deliver nothing, so the session can finish
// wiring itself (a resume delivers at once what was pending).
func (s *System) StartConsuming() error {
	s.mu.Lock()
	s.consuming = true
	list := make([]*nodeConsumer, 0, len(s.consumers))
	for _, nc := range s.consumers {
		list = append(list, nc)
	}
	s.mu.Unlock()
	for _, nc := range list {
		if err := s.startConsumer(nc); err != nil {
			return err
		}
	}
	return nil
}

func (s *System) startConsumer(nc *nodeConsumer) error {
	cc, err := nc.start()
	if err != nil {
		return err
	}
	s.mu.Lock()
	nc.cc = cc
	s.mu.Unlock()
	return nil
}

// A pull request lives pullExpiry on the server and is kept alive by
// heartbeats every pullHeartbeat: a pull lost with a server (a restart, a
// consumer leader elected elsewhere) is noticed after two missing
// heartbeats and made again, in seconds (nats.go's defaults, 30 s and
// 15 s, left a restarted stream unread for ~25 s). Idle, a consumer costs
// one heartbeat every 2 s and a pull every 10 s.
const (
	pullExpiry    = 10 * time.Second
	pullHeartbeat = 2 * time.Second
)

// startConsuming starts delivering a consumer's messages to the node.
func (s *System) startConsuming(pid *actor.PID, node string, cons jetstream.Consumer) (jetstream.ConsumeContext, error) {
	name := consumerName(node)
	cc, err := cons.Consume(func(m jetstream.Msg) { s.deliverDurable(pid, m) },
		jetstream.PullExpiry(pullExpiry), jetstream.PullHeartbeat(pullHeartbeat),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if !errors.Is(err, jetstream.ErrNoHeartbeat) {
				s.log.Warn("actors: consumer", "node", node, "err", err)
			}
		}))
	if err != nil {
		return nil, fmt.Errorf("actors: consume %s: %w", name, err)
	}
	return cc, nil
}

// addConsumerSubject makes a node's consumer read one more subject.
func (s *System) addConsumerSubject(node, subj string) error {
	s.mu.Lock()
	nc := s.consumers[node]
	var subjects []string
	if nc != nil {
		subjects = append(append(subjects, nc.subjects...), subj)
	}
	s.mu.Unlock()
	return s.setConsumerSubjects(node, subjects)
}

// removeConsumerSubject stops a node's consumer reading a subject.
func (s *System) removeConsumerSubject(node, subj string) error {
	s.mu.Lock()
	nc := s.consumers[node]
	var subjects []string
	if nc != nil {
		for _, x := range nc.subjects {
			if x != subj {
				subjects = append(subjects, x)
			}
		}
	}
	s.mu.Unlock()
	return s.setConsumerSubjects(node, subjects)
}

// setConsumerSubjects changes what a node's consumer reads (live edits).
func (s *System) setConsumerSubjects(node string, subjects []string) error {
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	s.mu.Lock()
	nc := s.consumers[node]
	s.mu.Unlock()
	if nc == nil {
		return fmt.Errorf("actors: node %s has no consumer", node)
	}
	cons, err := s.cfg.JetStream.Consumer(ctx, broker.StreamName(s.cfg.SessionID), nc.name)
	if err != nil {
		return err
	}
	cfg := cons.CachedInfo().Config
	cfg.FilterSubjects = subjects
	if _, err := s.cfg.JetStream.UpdateConsumer(ctx, broker.StreamName(s.cfg.SessionID), cfg); err != nil {
		return fmt.Errorf("actors: consumer %s: %w", nc.name, err)
	}
	s.mu.Lock()
	nc.subjects = subjects
	s.mu.Unlock()
	return nil
}

// stopConsumer ends a node's consumption; removed deletes the consumer
// (a node removed by a live edit).
func (s *System) stopConsumer(node string, removed bool) {
	s.mu.Lock()
	nc := s.consumers[node]
	delete(s.consumers, node)
	s.mu.Unlock()
	if nc == nil {
		return
	}
	s.mu.Lock()
	cc := nc.cc
	s.mu.Unlock()
	if cc != nil {
		cc.Stop()
		<-cc.Closed()
	}
	if removed {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.cfg.JetStream.DeleteConsumer(ctx, broker.StreamName(s.cfg.SessionID), nc.name)
	}
}

// deliverDurable is deliver for a JetStream message.
func (s *System) deliverDurable(pid *actor.PID, m jetstream.Msg) {
	env, err := DecodeEnvelope(m.Data())
	if err == nil {
		err = s.checkIngress(env, m.Headers().Get(HeaderOwn))
	}
	if err != nil {
		s.Emit(&pb.Event{Kind: "envelope.rejected", Message: err.Error(),
			Attrs: []*pb.KV{{Key: "subject", Value: m.Subject()}}})
		_ = s.cfg.Conn.Publish(broker.DeadLetter(s.cfg.SessionID), m.Data())
		_ = m.Term()
		return
	}
	if env.Id == "" {
		env.Id = m.Headers().Get("Nats-Msg-Id")
	}
	if env.Id == "" {
		// The stream sequence names it for good: a redelivery keeps it.
		if md, err := m.Metadata(); err == nil {
			env.Id = s.ids.sign(fmt.Sprintf("%s.seq.%d", s.cfg.SessionID, md.Sequence.Stream))
		}
	}
	if env.SessionId == "" {
		env.SessionId = s.cfg.SessionID
	}
	if c := callerFromHeaders(m.Headers()); c != nil {
		env.Caller = c
	}
	var seq uint64
	if md, err := m.Metadata(); err == nil {
		seq = md.Sequence.Stream
	}
	s.root.Send(pid, &delivery{edge: s.edgeOfSubject(m.Subject()), env: env, msg: m, seq: seq})
}

// edgeOfSubject is the edge id a subject carries ("" for an inbox).
func (s *System) edgeOfSubject(subj string) string {
	prefix := "sy." + s.cfg.SessionID + ".edge."
	if strings.HasPrefix(subj, prefix) {
		return subj[len(prefix):]
	}
	return ""
}

// track records a durable delivery at the node; false when its envelope
// was consumed already (acknowledged now) or is already held here (its
// acknowledgement waits for the first copy's).
func (a *nodeActor) track(m *delivery) bool {
	id := m.env.GetId()
	if a.s.consumed.has(id) {
		_ = m.msg.Ack()
		a.s.Emit(&pb.Event{Kind: "envelope.duplicate", Node: a.node.ID, EdgeId: m.edge,
			Message: "envelope " + id + " was already consumed"})
		return false
	}
	if m.seq > a.maxSeq {
		a.maxSeq = m.seq
	}
	a.unacked[m.seq] = struct{}{}
	if held, ok := a.acks[id]; ok {
		a.acks[id] = append(held, heldMsg{m.msg, m.seq})
		a.s.Emit(&pb.Event{Kind: "envelope.duplicate", Node: a.node.ID, EdgeId: m.edge,
			Message: "envelope " + id + " was already delivered"})
		return false
	}
	a.acks[id] = []heldMsg{{m.msg, m.seq}}
	return true
}

// heldMsg is a JetStream message a node holds until its envelope is
// consumed.
type heldMsg struct {
	msg jetstream.Msg
	seq uint64
}

// acknowledge acknowledges consumed envelopes (after their commit). The
// acknowledgements go out on the connection the next checkpoint is written
// on, so the server has them before it has that checkpoint.
func (a *nodeActor) acknowledge(ids []string) {
	for _, id := range ids {
		a.s.consumed.add(id)
		for _, h := range a.acks[id] {
			_ = h.msg.Ack()
			delete(a.unacked, h.seq)
		}
		delete(a.acks, id)
	}
}

// seqsOf are the stream sequences of the first copies of envelopes held.
func (a *nodeActor) seqsOf(ids []string) []uint64 {
	if !a.s.cfg.Consume {
		return nil
	}
	out := make([]uint64, len(ids))
	for i, id := range ids {
		if h := a.acks[id]; len(h) > 0 {
			out[i] = h[0].seq
		}
	}
	return out
}

// floor is the node's acknowledgement floor: every message it received
// at or below it was acknowledged.
func (a *nodeActor) floor() uint64 {
	if len(a.unacked) == 0 {
		return a.maxSeq
	}
	low := a.maxSeq + 1
	for seq := range a.unacked {
		if seq < low {
			low = seq
		}
	}
	return low - 1
}
