package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/switchyard/switchyard/actors"
	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/nodes"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// AnswerMessage is what `switchyard answer` (or any NATS client) publishes
// on sy.<session>.ctl.answer to answer a human gate.
type AnswerMessage struct {
	Node   string `json:"node"`
	Choice string `json:"choice"`
	By     string `json:"by,omitempty"`
}

// AnswerReply is the reply to an answer sent as a request (switchyard
// answer does): OK, or the refusal with the gate's options.
type AnswerReply struct {
	OK bool `json:"ok"`
	// Queued: no question is open at the node yet; the answer waits for it.
	Queued  bool     `json:"queued,omitempty"`
	Error   string   `json:"error,omitempty"`
	Options []string `json:"options,omitempty"`
}

// GateLookup tells the interviewer about a node of the session's graph:
// whether it is a human gate, and its question type and options.
type GateLookup func(node string) (qt nodes.QuestionType, opts []nodes.Option, ok bool)

// ControlInterviewer asks people through the session's subjects: the human
// gate publishes each question as a human.question event, and the answer arrives on
// sy.<session>.ctl.answer, as an AnswerMessage in JSON or as an envelope of
// kind human_answer addressed to the node. Answers that arrive before the
// question are kept for it.
//
// An answer is checked first: one for a node that is not a human gate, or
// that matches none of the gate's options, is refused with the options (a
// human.answer.refused event, and an AnswerReply when it came as a
// request). It never reaches the gate, so it is never mapped to an option.
type ControlInterviewer struct {
	nc      *nats.Conn
	session string
	clk     clock.Clock
	emit    func(*pb.Event)

	gates GateLookup // nil: answers are not checked here

	mu      sync.Mutex
	waiting map[string]chan AnswerMessage
	asking  map[string]string // node -> the question it waits on
	early   map[string][]AnswerMessage
	sub     *nats.Subscription
}

// NewControlInterviewer subscribes to the session's answer subject. emit
// publishes the question events; Close unsubscribes. It does not flush nc:
// the session's actor system subscribes on the same connection right after
// and flushes once for both (a round trip each was two per session start).
func NewControlInterviewer(nc *nats.Conn, sessionID string, clk clock.Clock, emit func(*pb.Event), gates GateLookup) (*ControlInterviewer, error) {
	if clk == nil {
		clk = clock.Real()
	}
	c := &ControlInterviewer{nc: nc, session: sessionID, clk: clk, emit: emit, gates: gates,
		waiting: map[string]chan AnswerMessage{}, asking: map[string]string{}, early: map[string][]AnswerMessage{}}
	sub, err := nc.Subscribe(broker.Control(sessionID, "answer"), c.receive)
	if err != nil {
		return nil, err
	}
	c.sub = sub
	return c, nil
}

// Close stops listening for answers.
func (c *ControlInterviewer) Close() error { return c.sub.Unsubscribe() }

// ParseAnswer reads an answer message in either accepted form.
func ParseAnswer(data []byte) (AnswerMessage, error) {
	var a AnswerMessage
	trimmed := strings.TrimSpace(string(data))
	if strings.HasPrefix(trimmed, "{") && !strings.Contains(trimmed, `"kind"`) {
		if err := json.Unmarshal(data, &a); err != nil {
			return a, fmt.Errorf("bad answer: %v", err)
		}
	} else {
		env, err := actors.DecodeEnvelope(data)
		if err != nil {
			return a, err
		}
		a = AnswerMessage{Node: env.GetToNode(), Choice: env.GetPayload().GetMessage(), By: env.GetFromNode()}
	}
	if a.Node == "" {
		return a, errors.New("bad answer: no node")
	}
	return a, nil
}

func (c *ControlInterviewer) receive(m *nats.Msg) {
	if broker.ServerReply(m) {
		c.emit(&pb.Event{Kind: "control.ignored", Message: "not an answer: a server's reply sent to " + m.Subject,
			Attrs: []*pb.KV{{Key: "subject", Value: m.Subject}}})
		return
	}
	a, err := ParseAnswer(m.Data)
	if err != nil {
		c.emit(&pb.Event{Kind: "envelope.rejected", Message: err.Error(),
			Attrs: []*pb.KV{{Key: "subject", Value: m.Subject}}})
		c.reply(m, AnswerReply{Error: err.Error()})
		return
	}
	if c.gates != nil {
		qt, opts, ok := c.gates(a.Node)
		if !ok {
			why := fmt.Sprintf("node %s is not a human gate of session %s", a.Node, c.session)
			c.emit(&pb.Event{Kind: "human.answer.refused", Node: a.Node, Message: why,
				Attrs: []*pb.KV{{Key: "answer", Value: a.Choice}, {Key: "by", Value: a.By}}})
			c.reply(m, AnswerReply{Error: why})
			return
		}
		if err := nodes.CheckAnswer(a.Node, qt, opts, a.Choice); err != nil {
			list := make([]string, len(opts))
			for i, o := range opts {
				list[i] = nodes.OptionList([]nodes.Option{o})
			}
			c.emit(&pb.Event{Kind: "human.answer.refused", Node: a.Node, Message: err.Error(),
				Attrs: []*pb.KV{{Key: "answer", Value: a.Choice}, {Key: "by", Value: a.By}}})
			c.reply(m, AnswerReply{Error: err.Error(), Options: list})
			return
		}
	}
	c.mu.Lock()
	ch, ok := c.waiting[a.Node]
	if ok {
		delete(c.waiting, a.Node)
	} else {
		c.early[a.Node] = append(c.early[a.Node], a)
	}
	c.mu.Unlock()
	if ok {
		ch <- a
	}
	c.reply(m, AnswerReply{OK: true, Queued: !ok})
}

// reply answers a request (an answer published without a reply subject
// gets none).
func (c *ControlInterviewer) reply(m *nats.Msg, r AnswerReply) {
	if m.Reply == "" {
		return
	}
	data, _ := json.Marshal(r)
	_ = broker.Respond(m, data)
}

// Ask publishes the question and waits for its answer, the question's
// timeout (answered TIMEOUT) or ctx.
func (c *ControlInterviewer) Ask(ctx context.Context, q *nodes.Question) (*nodes.Answer, error) {
	ch := make(chan AnswerMessage, 1)
	c.mu.Lock()
	if early := c.early[q.Stage]; len(early) > 0 {
		c.early[q.Stage] = early[1:]
		ch <- early[0]
	} else {
		c.waiting[q.Stage] = ch
		c.asking[q.Stage] = q.Text
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		if c.waiting[q.Stage] == ch {
			delete(c.waiting, q.Stage)
			delete(c.asking, q.Stage)
		}
		c.mu.Unlock()
	}()
	var timeout <-chan struct{}
	if q.Timeout > 0 {
		done := make(chan struct{})
		t := c.clk.AfterFunc(q.Timeout, func() { close(done) })
		defer t.Stop()
		timeout = done
	}
	select {
	case a := <-ch:
		return &nodes.Answer{Value: a.Choice, Text: a.Choice, By: a.By, At: c.clk.Now()}, nil
	case <-timeout:
		return &nodes.Answer{Value: "TIMEOUT", At: c.clk.Now()}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Asking returns the question a node waits on an answer to; ok is false
// when it waits on none.
func (c *ControlInterviewer) Asking(node string) (question string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	question, ok = c.asking[node]
	return question, ok
}

// Fallback asks first; when first has no answer (SKIPPED, as an empty
// queue says), it asks next.
func Fallback(first, next nodes.Interviewer) nodes.Interviewer {
	return fallback{first, next}
}

type fallback struct{ first, next nodes.Interviewer }

func (f fallback) Ask(ctx context.Context, q *nodes.Question) (*nodes.Answer, error) {
	a, err := f.first.Ask(ctx, q)
	if err != nil || a == nil || a.Value != "SKIPPED" {
		return a, err
	}
	return f.next.Ask(ctx, q)
}
