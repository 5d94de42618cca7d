package web

import (
	"strings"
	"sync"
	"time"

	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// backlog is how many events a session keeps for pages that open late.
const backlog = 2000

// Event is an event as the page gets it: the fields of `switchyard run
// --json`, with the kind-specific attributes under attrs.
type Event struct {
	Kind       string            `json:"kind"`
	Seq        uint64            `json:"seq"`
	Time       string            `json:"time,omitempty"`
	Node       string            `json:"node,omitempty"`
	Status     string            `json:"status,omitempty"`
	Attempts   uint32            `json:"attempts,omitempty"`
	DurationMS int64             `json:"duration_ms,omitempty"`
	Edge       string            `json:"edge,omitempty"`
	Message    string            `json:"message,omitempty"`
	Usage      *Usage            `json:"usage,omitempty"`
	Attrs      map[string]string `json:"attrs,omitempty"`
}

// Usage is tokens and cost.
type Usage struct {
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	Cost         float64 `json:"cost"`
}

func (u *Usage) add(o *pb.Usage) {
	u.InputTokens += o.GetInputTokens()
	u.OutputTokens += o.GetOutputTokens()
	u.Cost += o.GetCost()
}

func toEvent(ev *pb.Event) Event {
	e := Event{Kind: ev.GetKind(), Seq: ev.GetSeq(), Node: ev.GetNode(), Status: ev.GetStatus(), Attempts: ev.GetAttempts(),
		DurationMS: ev.GetDurationMs(), Edge: ev.GetEdgeId(), Message: ev.GetMessage()}
	if t := ev.GetTime(); t != nil {
		e.Time = t.AsTime().UTC().Format(time.RFC3339Nano)
	}
	if u := ev.GetUsage(); u != nil {
		e.Usage = &Usage{}
		e.Usage.add(u)
	}
	if len(ev.GetAttrs()) > 0 {
		e.Attrs = make(map[string]string, len(ev.GetAttrs()))
		for _, kv := range ev.GetAttrs() {
			e.Attrs[kv.GetKey()] = kv.GetValue()
		}
	}
	return e
}

// Question is a human gate's open question.
type Question struct {
	Text    string   `json:"text"`
	Type    string   `json:"type,omitempty"`
	Options []Option `json:"options,omitempty"`
}

// Option is one of a question's choices.
type Option struct {
	Key   string `json:"key"`
	Label string `json:"label"`
}

// nodeTrack is what the events told of a node.
type nodeTrack struct {
	runs     int
	last     string // the last outcome status
	reason   string // the last failure reason
	running  bool
	stopped  string // why the scheduler stopped it ("" when not)
	question *Question
	usage    Usage
}

// tracker follows one session's events: a backlog for late pages, what
// each node did, and the pages listening live.
type tracker struct {
	mu     sync.Mutex
	events []Event // the last backlog events, oldest first
	nodes  map[string]*nodeTrack
	status string // running, success, fail, stopped, fatal
	reason string
	usage  Usage
	subs   map[chan Event]struct{}
}

func newTracker() *tracker {
	return &tracker{nodes: map[string]*nodeTrack{}, status: "starting", subs: map[chan Event]struct{}{}}
}

func (t *tracker) node(id string) *nodeTrack {
	n := t.nodes[id]
	if n == nil {
		n = &nodeTrack{}
		t.nodes[id] = n
	}
	return n
}

// observe takes one event (on the session's event goroutine).
func (t *tracker) observe(pbev *pb.Event) {
	ev := toEvent(pbev)
	t.mu.Lock()
	defer t.mu.Unlock()
	if ev.Node != "" {
		n := t.node(ev.Node)
		switch ev.Kind {
		case "node.started":
			n.running, n.stopped = true, ""
		case "node.completed":
			n.running, n.question = false, nil
			n.runs++
			n.last, n.reason = ev.Status, ev.Attrs["failure_reason"]
			if ev.Usage != nil {
				n.usage.InputTokens += ev.Usage.InputTokens
				n.usage.OutputTokens += ev.Usage.OutputTokens
				n.usage.Cost += ev.Usage.Cost
				t.usage.InputTokens += ev.Usage.InputTokens
				t.usage.OutputTokens += ev.Usage.OutputTokens
				t.usage.Cost += ev.Usage.Cost
			}
		case "human.question":
			q := &Question{Text: ev.Message, Type: ev.Attrs["type"]}
			for k, v := range ev.Attrs {
				if key, ok := strings.CutPrefix(k, "option."); ok {
					q.Options = append(q.Options, Option{Key: key, Label: v})
				}
			}
			sortOptions(q.Options)
			n.question = q
		case "human.answer":
			n.question = nil
		case "node.refused", "iterations.exceeded", "stall.detected":
			n.stopped = ev.Message
		}
	}
	switch ev.Kind {
	case "session.started", "session.resumed", "session.restarted":
		t.status = "running"
	case "session.completed":
		t.status, t.reason = ev.Status, ev.Message
	case "session.stopped":
		t.status = "stopped"
	case "session.fatal":
		t.status, t.reason = "fatal", ev.Message
	}
	t.events = append(t.events, ev)
	if len(t.events) > backlog {
		t.events = append(t.events[:0:0], t.events[len(t.events)-backlog:]...)
	}
	for ch := range t.subs {
		select {
		case ch <- ev:
		default:
			// A page that does not keep up is cut off; its EventSource
			// reconnects and catches up from the backlog.
			delete(t.subs, ch)
			close(ch)
		}
	}
}

func sortOptions(o []Option) {
	for i := 1; i < len(o); i++ {
		for j := i; j > 0 && o[j].Key < o[j-1].Key; j-- {
			o[j], o[j-1] = o[j-1], o[j]
		}
	}
}

// subscribe returns the events after seq still in the backlog and a
// channel of the next ones (closed when the page falls behind).
func (t *tracker) subscribe(after uint64) ([]Event, chan Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var past []Event
	for _, ev := range t.events {
		if ev.Seq > after {
			past = append(past, ev)
		}
	}
	ch := make(chan Event, 512)
	t.subs[ch] = struct{}{}
	return past, ch
}

func (t *tracker) unsubscribe(ch chan Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.subs[ch]; ok {
		delete(t.subs, ch)
		close(ch)
	}
}
