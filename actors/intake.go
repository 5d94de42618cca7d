package actors

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/internal/crash"
)

// Intake: how a durable session's outside input reaches its work stream.
// broker.WorkSubjects chooses the mode from the number of inbound
// subjects of the graph, at start, on resume and at every live edit
// (narrowStream):
//
//   - listed (up to broker.MaxListedSubjects): the stream stores the
//     graph's inboxes and edges themselves. Outside publishers and the
//     nodes publish there; the stream acknowledges a JetStream publish
//     even while no process serves the session. The session's intake
//     subscription only refuses what no stream stores (stray) and answers
//     verdicts.
//   - ingress (past it): the stream stores the session's broker.Stored
//     subjects, where the nodes publish (System.Send). Outside publishers
//     still publish on the inboxes and edges; the intake subscription (a
//     queue group: whichever process serves the session takes each
//     envelope once) checks each envelope (checkEnvelope), refuses it
//     like stray does, or republishes it unchanged under its Stored
//     subject with the publisher's headers (its Nats-Msg-Id among them:
//     a retried publish is stored once) and the publisher's reply subject
//     when it is a reply inbox (broker.ReplyInbox) — the stream's publish
//     acknowledgement goes to the publisher directly, once the envelope is
//     stored. The envelope it decoded is kept for the consumer's delivery
//     of the same bytes (decodedCache), which does not decode it again.
//     Kill points intake-kept and intake-republished
//     (cmd/switchyard TestCrashQueueIntake).
//
// The consumer reads the whole stream, both kinds of subject
// (consumerConfig), so what the stream stored before a change of mode is
// delivered after it.

// intakeQueue is the queue group of the intake subscriptions.
const intakeQueue = "sy-intake"

// narrowStream sets the durable session's work stream to the subjects
// broker.WorkSubjects gives for its nodes' inbound subjects, and the
// session's mode with it; when the mode changes, the stream stores both
// kinds of subject while the mode flips (broker.SetInbound), so no publish
// made on either side of the change goes unstored.
func (s *System) narrowStream(subjects map[string]bool) error {
	return s.narrowStreamFrom(nil, subjects)
}

// ListInbound sets the durable session's work stream to the subjects its
// graph's inbound subjects call for (broker.WorkSubjects): a session that
// started in ingress mode without a stream (Config.MakeStream) lists them
// before its process lets go of it, so that outside input is stored while
// no process serves it. It does nothing when they are set.
//
// A session whose work stream was not made yet (Config.MakeStream) has it
// made here, listing them, without a consumer: the resume makes that.
func (s *System) ListInbound() error {
	subjects := s.topo.Load().subjects
	if !s.StreamMade() {
		if err := s.makeStreamLate(broker.Inbound(sortedSubjects(subjects)), false); err != nil {
			return err
		}
		_, ingress := broker.WorkSubjects(s.cfg.SessionID, sortedSubjects(subjects))
		s.ingress.Store(ingress)
		return nil
	}
	return s.narrowStream(subjects)
}

// narrowStreamFrom is narrowStream of a stream whose subjects are current
// (nil: not known): when they are already the ones to set, nothing is sent.
func (s *System) narrowStreamFrom(current []string, subjects map[string]bool) error {
	if s.cfg.JetStream == nil || !s.StreamMade() {
		return nil // not made yet: it is made in ingress mode, which stores any subject
	}
	if current != nil {
		if ingress, set := broker.InboundSet(s.cfg.SessionID, sortedSubjects(subjects), current); set {
			s.ingress.Store(ingress)
			return nil
		}
	}
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	ingress, err := broker.SetInbound(ctx, s.cfg.JetStream, s.cfg.SessionID, sortedSubjects(subjects),
		func(ingress bool) { s.ingress.Store(ingress) })
	if err != nil {
		return fmt.Errorf("actors: %w", err)
	}
	s.ingress.Store(ingress)
	return nil
}

// subscribeIntake subscribes a durable session to its inboxes and edges
// on core NATS (its nodes read through the stream's consumer): intake.
func (s *System) subscribeIntake() error {
	for _, pattern := range []string{broker.NodeIn(s.cfg.SessionID, "*"), broker.Edge(s.cfg.SessionID, ">")} {
		sub, err := s.cfg.Conn.QueueSubscribe(pattern, intakeQueue, s.intake)
		if err != nil {
			return fmt.Errorf("actors: subscribe %s: %w", pattern, err)
		}
		_ = sub.SetPendingLimits(-1, -1)
		s.mu.Lock()
		s.subs = append(s.subs, sub)
		s.mu.Unlock()
	}
	return nil
}

// intake takes an envelope published on an inbox or edge of a durable
// session (see Intake above).
func (s *System) intake(m *nats.Msg) {
	if !s.ingress.Load() || !s.topo.Load().subjects[m.Subject] {
		s.stray(m) // stored by the stream itself, or refused
		return
	}
	env, err := DecodeEnvelope(m.Data)
	if err == nil {
		err = checkEnvelope(s.cfg.SessionID, env)
	}
	if err != nil {
		s.refuse(m, err.Error())
		return
	}
	if err := s.makeStreamLate(broker.Ingress(), true); err != nil {
		// Not stored: a publisher waiting for its acknowledgement
		// publishes again.
		s.log.Warn("actors: intake", "subject", m.Subject, "err", err)
		return
	}
	// Kept before it is stored: its delivery comes after.
	s.decoded.put(m.Header.Get(nats.MsgIdHdr), m.Data, env)
	verdictTo := m.Header.Get(broker.VerdictHeader)
	out := &nats.Msg{Subject: broker.Stored(m.Subject), Data: m.Data, Header: m.Header}
	if broker.ReplyInbox(m.Reply) {
		// Only to a reply inbox: the stream's acknowledgement must not
		// land on a subject the publisher may not publish on itself.
		out.Reply = m.Reply
	}
	if verdictTo != "" {
		out.Header.Del(broker.VerdictHeader)
	}
	crash.Point("intake-kept") // decoded and kept, not republished: not stored, not acknowledged
	if err := s.cfg.Conn.PublishMsg(out); err != nil {
		// Not stored: a publisher waiting for its acknowledgement
		// publishes again.
		s.log.Warn("actors: intake", "subject", m.Subject, "err", err)
		return
	}
	crash.Point("intake-republished") // sent to the stream (perhaps still in the connection's buffer), perhaps stored and acknowledged
	if verdictTo != "" {
		s.sendVerdict(verdictTo, Verdict{OK: true, Session: s.cfg.SessionID, Durable: true})
	}
}

// routeOf is the route of a subject: an inbox or edge, or its Stored
// subject (read without allocating).
func (s *System) routeOf(subj string) (route, bool) {
	s.routeMu.RLock()
	defer s.routeMu.RUnlock()
	if r, ok := s.routes[subj]; ok {
		return r, true
	}
	stored := s.storedPrefix
	if !strings.HasPrefix(subj, stored) {
		return route{}, false
	}
	var buf [256]byte
	k := append(append(buf[:0], subj[:len(stored)-2]...), subj[len(stored):]...)
	r, ok := s.routes[string(k)]
	return r, ok
}
