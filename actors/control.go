package actors

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/switchyard/switchyard/broker"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// TriggerRequest is what sy.<session>.ctl.trigger carries: JSON
// {"node": "id", "message": "..."} or just the node id.
type TriggerRequest struct {
	Node    string `json:"node"`
	Message string `json:"message,omitempty"`
}

// ExplainRequest asks sy.<session>.ctl.explain about one node ("" for all).
type ExplainRequest struct {
	Node string `json:"node"`
}

// ExplainReply is the answer: the node's explanation and every gate state.
type ExplainReply struct {
	Node    string      `json:"node,omitempty"`
	Explain string      `json:"explain,omitempty"`
	States  []GateState `json:"states"`
	Error   string      `json:"error,omitempty"`
}

// GateState is one node's state as the explain reply shows it.
type GateState struct {
	Node   string `json:"node"`
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	Since  string `json:"since"`
}

// subscribeControl answers the session's trigger and explain subjects.
func (s *System) subscribeControl() error {
	trig, err := s.cfg.Conn.Subscribe(broker.Control(s.cfg.SessionID, "trigger"), func(m *nats.Msg) {
		if broker.ServerReply(m) {
			s.ignoredControl(m)
			return
		}
		var req TriggerRequest
		if err := json.Unmarshal(m.Data, &req); err != nil {
			req.Node = strings.TrimSpace(string(m.Data))
		}
		var env *pb.Envelope
		if req.Message != "" {
			env = &pb.Envelope{Id: s.cfg.SessionID + "." + req.Node + ".trigger." + nuid.Next(), SessionId: s.cfg.SessionID,
				Kind: KindControl, ToNode: req.Node, Payload: &pb.Payload{Message: req.Message}}
		}
		err := s.Trigger(req.Node, env)
		if m.Reply != "" {
			reply := map[string]string{"node": req.Node, "status": "triggered"}
			if err != nil {
				reply["status"], reply["error"] = "error", err.Error()
			}
			data, _ := json.Marshal(reply)
			_ = broker.Respond(m, data)
		}
	})
	if err != nil {
		return err
	}
	expl, err := s.cfg.Conn.Subscribe(broker.Control(s.cfg.SessionID, "explain"), func(m *nats.Msg) {
		var req ExplainRequest
		if err := json.Unmarshal(m.Data, &req); err != nil {
			req.Node = strings.TrimSpace(string(m.Data))
		}
		data, _ := json.Marshal(s.Explain(req.Node))
		_ = broker.Respond(m, data)
	})
	if err != nil {
		_ = trig.Unsubscribe()
		return err
	}
	s.mu.Lock()
	s.subs = append(s.subs, trig, expl)
	s.mu.Unlock()
	return nil
}

// Explain describes a node's gate state ("why is this node not running?")
// and lists every node's.
func (s *System) Explain(node string) ExplainReply {
	r := ExplainReply{Node: node}
	if node != "" {
		if s.graph().Node(node) == nil {
			r.Error = "no node " + node
		} else {
			r.Explain = s.sched.ExplainHeld(node, s.buffered(node))
			if q, ok := s.asking(node); ok {
				r.Explain = "waiting for a person's answer to: " + q + " (switchyard answer, or the web view)\n" + r.Explain
			}
		}
	}
	for _, st := range s.sched.States() {
		gs := GateState{Node: st.Node, State: st.State, Reason: st.Reason, Since: st.Since.UTC().Format("2006-01-02T15:04:05Z07:00")}
		if q, ok := s.asking(st.Node); ok && st.State == "running" {
			gs.State, gs.Reason = "waiting", "waiting for an answer: "+q
		}
		r.States = append(r.States, gs)
	}
	return r
}

// asking is Config.Asking, false when it is not set.
func (s *System) asking(node string) (string, bool) {
	if s.cfg.Asking == nil {
		return "", false
	}
	return s.cfg.Asking(node)
}

// buffered asks a node's actor how many envelopes wait in its delivery
// buffers (0 when it cannot tell).
func (s *System) buffered(node string) int {
	s.mu.Lock()
	pid, ok := s.pidLocked(node)
	stopped := s.stopped
	s.mu.Unlock()
	if !ok || stopped {
		return 0
	}
	res, err := s.as.await(func() *actor.Future { return s.root.RequestFuture(pid, &heldQuery{}, 5*time.Second) })
	if err != nil {
		return 0
	}
	n, _ := res.(int)
	return n
}

// ignoredControl records a message on a control subject that the server
// sent as an answer on a reply subject someone chose (broker.ServerReply):
// it asks for nothing.
func (s *System) ignoredControl(m *nats.Msg) {
	s.Emit(&pb.Event{Kind: "control.ignored", Message: "not a request: a server's reply sent to " + m.Subject,
		Attrs: []*pb.KV{{Key: "subject", Value: m.Subject}}})
}
