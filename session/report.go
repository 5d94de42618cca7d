package session

import (
	"sync"
	"time"

	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/nodes"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// NodeReport is what a session did at one node.
type NodeReport struct {
	Node     string
	Status   string // the last visit's status ("" when the node never ran)
	Visits   int
	Attempts int // over all visits
	Duration time.Duration
	Output   string // the last visit's output summary
	Usage    nodes.Usage
}

// Report is the result of a session.
type Report struct {
	SessionID string
	Status    string // success, fail, or running
	Reason    string
	// FailedNode is the node whose failure ended a failed run ("" when none did:
	// a stall, a fatal error); Cause is why, for errors.Is (nil when the
	// node simply failed): see CauseError.
	FailedNode string
	Cause      error
	Duration   time.Duration
	Nodes      []NodeReport // in order of first visit
	Usage      nodes.Usage
}

// Node returns the report of one node, or nil.
func (r *Report) Node(id string) *NodeReport {
	for i := range r.Nodes {
		if r.Nodes[i].Node == id {
			return &r.Nodes[i]
		}
	}
	return nil
}

// reporter builds the Report from events.
type reporter struct {
	mu     sync.Mutex
	rep    Report
	byNode map[string]int
}

func newReporter(_ *graph.Graph) *reporter {
	return &reporter{rep: Report{Status: "running"}, byNode: map[string]int{}}
}

func (r *reporter) observe(ev *pb.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rep.SessionID = ev.GetSessionId()
	switch ev.GetKind() {
	case "node.completed":
		i, ok := r.byNode[ev.GetNode()]
		if !ok {
			i = len(r.rep.Nodes)
			r.byNode[ev.GetNode()] = i
			r.rep.Nodes = append(r.rep.Nodes, NodeReport{Node: ev.GetNode()})
		}
		n := &r.rep.Nodes[i]
		n.Status = ev.GetStatus()
		n.Visits++
		n.Attempts += int(ev.GetAttempts())
		n.Duration += time.Duration(ev.GetDurationMs()) * time.Millisecond
		n.Output = ev.GetMessage()
		if u := ev.GetUsage(); u != nil {
			add := nodes.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, Cost: u.Cost}
			n.Usage = n.Usage.Add(add)
			r.rep.Usage = r.rep.Usage.Add(add)
		}
	case "session.completed":
		r.rep.Status = ev.GetStatus()
		r.rep.Reason = ev.GetMessage()
		for _, kv := range ev.GetAttrs() {
			switch kv.GetKey() {
			case "cause":
				r.rep.Cause = CauseError(kv.GetValue())
			case "failed_node":
				r.rep.FailedNode = kv.GetValue()
			}
		}
		r.rep.Duration = time.Duration(ev.GetDurationMs()) * time.Millisecond
	}
}

func (r *reporter) result() *Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.rep
	out.Nodes = append([]NodeReport(nil), r.rep.Nodes...)
	return &out
}
