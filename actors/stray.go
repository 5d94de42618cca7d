package actors

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/edges"
	"github.com/switchyard/switchyard/graph"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// Verdict is the session's answer to an envelope published with a
// VerdictHeader (and, for a refusal, to a request on a session that is not
// durable).
type Verdict struct {
	OK      bool   `json:"ok"`
	Session string `json:"session"`
	Error   string `json:"error,omitempty"`
	// Durable says the session keeps its envelopes in JetStream: the
	// publisher should also wait for the stream's acknowledgement.
	Durable bool `json:"durable,omitempty"`
}

// knownSubjects are the subjects the nodes of g receive on: their inboxes
// and their incoming edges.
func knownSubjects(session string, g *graph.Graph) map[string]bool {
	m := make(map[string]bool, len(g.Nodes)+len(g.Edges))
	for _, n := range g.Nodes {
		m[broker.NodeIn(session, n.ID)] = true
	}
	for _, e := range g.Edges {
		m[broker.Edge(session, edges.EdgeID(e))] = true
	}
	return m
}

// InboundSubjects are the subjects the nodes of g receive on, sorted: their
// inboxes and their incoming edges (the reverse edges of bidirectional
// ones among them). A durable session's work stream stores these
// (broker.Inbound, broker.WorkSubjects).
func InboundSubjects(session string, g *graph.Graph) []string {
	return sortedSubjects(knownSubjects(session, withReverseEdges(g)))
}

func sortedSubjects(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for subj := range m {
		out = append(out, subj)
	}
	sort.Strings(out)
	return out
}

// narrowStream makes the durable session's work stream store exactly the
// subjects its nodes receive on, when they are few enough for the stream
// to list them (broker.WorkSubjects): a publish on any other subject of
// the session is then stored by no stream, and the stray watcher's answer
// is the only reply a requester gets.
func (s *System) narrowStream(subjects map[string]bool) error {
	if s.cfg.JetStream == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	listed, err := broker.SetInbound(ctx, s.cfg.JetStream, s.cfg.SessionID, sortedSubjects(subjects))
	if err != nil {
		return fmt.Errorf("actors: %w", err)
	}
	s.listed.Store(listed)
	return nil
}

func newTopology(session string, g *graph.Graph) *topology {
	return &topology{g: g, joins: joinNodes(g), subjects: knownSubjects(session, g)}
}

// subscribeStray watches every inbound subject of the session (node
// inboxes and edges): an envelope on a subject no node receives on is
// refused visibly — an envelope.rejected event, the envelope on
// sy.<session>.dlq, and a Refusal as the reply to a request (in a durable
// session, when its work stream lists its subjects: past
// broker.MaxListedSubjects the stream stores every inbox and edge and
// acknowledges the request itself) — and an envelope carrying a
// broker.VerdictHeader gets the session's verdict.
// A durable session has this subscription of its own (its nodes read
// through the stream's consumer); one that is not durable has its
// dispatch subscription, on the same subjects, call stray.
func (s *System) subscribeStray() error {
	for _, pattern := range []string{broker.NodeIn(s.cfg.SessionID, "*"), broker.Edge(s.cfg.SessionID, ">")} {
		sub, err := s.cfg.Conn.Subscribe(pattern, s.stray)
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

func (s *System) stray(m *nats.Msg) {
	verdictTo := ""
	if m.Header != nil {
		verdictTo = m.Header.Get(broker.VerdictHeader)
	}
	if s.topo.Load().subjects[m.Subject] {
		if verdictTo != "" {
			s.sendVerdict(verdictTo, Verdict{OK: true, Session: s.cfg.SessionID, Durable: s.cfg.JetStream != nil})
		}
		return
	}
	why := s.unknownTarget(m.Subject)
	s.Emit(&pb.Event{Kind: "envelope.rejected", Message: why, Attrs: []*pb.KV{{Key: "subject", Value: m.Subject}}})
	dl := nats.NewMsg(broker.DeadLetter(s.cfg.SessionID))
	dl.Data = m.Data
	dl.Header.Set("Switchyard-Subject", m.Subject)
	dl.Header.Set("Switchyard-Reason", why)
	_ = s.cfg.Conn.PublishMsg(dl)
	v := Verdict{Session: s.cfg.SessionID, Error: why}
	if verdictTo != "" {
		s.sendVerdict(verdictTo, v)
	}
	if m.Reply != "" && (s.cfg.JetStream == nil || s.listed.Load()) {
		data, _ := json.Marshal(Refusal{Session: s.cfg.SessionID,
			Error: RefusalError{Code: 404, Description: why}})
		_ = broker.Respond(m, data)
	}
}

// Refusal is the reply to a request (nats req, a JetStream publish) on an
// inbox or edge the session does not have. Its error has the form of a
// JetStream API error, so a JetStream client's publish fails with the
// reason as its description; a plain requester reads the reason as
// error.description.
type Refusal struct {
	OK      bool         `json:"ok"`
	Session string       `json:"session"`
	Error   RefusalError `json:"error"`
}

// RefusalError is why a Refusal refused: code 404, the reason as description.
type RefusalError struct {
	Code        int    `json:"code"`
	ErrCode     int    `json:"err_code"`
	Description string `json:"description"`
}

// sendVerdict publishes a verdict on an inbox the publisher chose (only
// reply inboxes: a verdict is never published onto a session's subjects).
func (s *System) sendVerdict(to string, v Verdict) {
	if !strings.HasPrefix(to, "_INBOX.") && !strings.HasPrefix(to, "_SYRT.") {
		return
	}
	data, _ := json.Marshal(v)
	_ = s.cfg.Conn.Publish(to, data)
}

// unknownTarget says why a subject reaches no node.
func (s *System) unknownTarget(subj string) string {
	g := s.graph()
	rest := strings.TrimPrefix(subj, "sy."+s.cfg.SessionID+".")
	if node, ok := strings.CutPrefix(rest, "node."); ok {
		node = strings.TrimSuffix(node, ".in")
		ids := make([]string, 0, len(g.Nodes))
		for _, n := range g.Nodes {
			ids = append(ids, n.ID)
		}
		sort.Strings(ids)
		return fmt.Sprintf("no node %s in session %s (its nodes: %s)", node, s.cfg.SessionID, strings.Join(ids, ", "))
	}
	edge := strings.TrimPrefix(rest, "edge.")
	ids := make([]string, 0, len(g.Edges))
	for _, e := range g.Edges {
		ids = append(ids, strings.Replace(edges.EdgeID(e), ".", ":", 1))
	}
	sort.Strings(ids)
	return fmt.Sprintf("no edge %s in session %s (its edges: %s)", strings.Replace(edge, ".", ":", 1), s.cfg.SessionID, strings.Join(ids, ", "))
}
