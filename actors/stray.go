package actors

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

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
	return subjectsOf(session, g).set()
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

func newTopology(session string, g *graph.Graph) *topology {
	return topologyOf(g, subjectsOf(session, g))
}

// topologyOf is g's topology, its subjects sj's.
func topologyOf(g *graph.Graph, sj *sessionSubjects) *topology {
	return &topology{g: g, joins: sj.names.joins, subjects: sj.set(), session: g.Kind() == "session"}
}

// stray answers an envelope published on an inbox or edge of the session
// that no stream stores: a verdict when the publisher asks for one
// (broker.VerdictHeader), and, on a subject no node receives on, a refusal
// (refuse). A durable session's intake calls it (intake.go); one that is
// not durable has its dispatch subscription call it.
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
	s.refuse(m, s.unknownTarget(m.Subject))
}

// refuse refuses an envelope visibly: an envelope.rejected event, the
// envelope on sy.<session>.dlq, the refusal as its verdict, and a Refusal
// as the reply to a request.
func (s *System) refuse(m *nats.Msg, why string) {
	s.Emit(&pb.Event{Kind: "envelope.rejected", Message: why, Attrs: []*pb.KV{{Key: "subject", Value: m.Subject}}})
	dl := nats.NewMsg(broker.DeadLetter(s.cfg.SessionID))
	dl.Data = m.Data
	dl.Header.Set("Switchyard-Subject", m.Subject)
	dl.Header.Set("Switchyard-Reason", why)
	s.deadLetter(dl)
	if verdictTo := m.Header.Get(broker.VerdictHeader); verdictTo != "" {
		s.sendVerdict(verdictTo, Verdict{Session: s.cfg.SessionID, Error: why})
	}
	if m.Reply != "" {
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
		return fmt.Sprintf("no node %s in session %s (its nodes: %s)", node, s.cfg.SessionID, someOf(ids))
	}
	edge := strings.TrimPrefix(rest, "edge.")
	ids := make([]string, 0, len(g.Edges))
	for _, e := range g.Edges {
		ids = append(ids, strings.Replace(edges.EdgeID(e), ".", ":", 1))
	}
	return fmt.Sprintf("no edge %s in session %s (its edges: %s)", strings.Replace(edge, ".", ":", 1), s.cfg.SessionID, someOf(ids))
}

// maxNamed is the most node or edge ids a refusal names.
const maxNamed = 20

// someOf lists ids sorted, the first maxNamed of them: a refusal in a
// graph of thousands of nodes stays a line.
func someOf(ids []string) string {
	sort.Strings(ids)
	if len(ids) <= maxNamed {
		return strings.Join(ids, ", ")
	}
	return fmt.Sprintf("%s, and %d more", strings.Join(ids[:maxNamed], ", "), len(ids)-maxNamed)
}
