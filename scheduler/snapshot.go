package scheduler

import (
	"sort"
	"time"
)

// Snapshot is the scheduler's durable state as a plain, JSON-serialisable
// struct, for checkpoints: firing counters, budgets spent and the
// thresholds already announced, the stall windows, stopped nodes, and the
// join buffers.
//
// Join buffers and held inputs are recorded by item id (items with a
// GetId() string method, such as envelopes), for inspection: Restore does
// not refill them, because on resume the owner redelivers the envelopes no
// firing consumed. What Restore does bring back of a join is its skipped
// edges, which no redelivery would repeat.
type Snapshot struct {
	Iterations map[string]int      `json:"iterations"`
	Total      int                 `json:"total"`
	Spent      map[string]Spent    `json:"spent"`
	Announced  map[string][]string `json:"announced,omitempty"` // scope -> "tokens:80", "cost:100"...
	Stopped    map[string]string   `json:"stopped,omitempty"`   // node -> reason
	Causes     map[string]string   `json:"causes,omitempty"`    // node -> cause of its stop
	Stalls     map[string][]string `json:"stalls,omitempty"`    // node -> last results, oldest first
	Joins      map[string]Join     `json:"joins,omitempty"`     // node -> its join buffer
	Held       map[string][]string `json:"held,omitempty"`      // manual/cron node -> ids of held inputs
	// Windows: the times of the recent firings under windowed caps
	// (max_iterations="N/window"), by node ("" for the session).
	Windows map[string][]time.Time `json:"windows,omitempty"`
}

// Join is a join gate's buffer: each upstream edge's state ("waiting",
// "delivered", "skipped") and the ids of the arrivals queued on it.
type Join struct {
	Edges  map[string]string   `json:"edges"`
	Queued map[string][]string `json:"queued,omitempty"`
}

var edgeStateNames = map[edgeState]string{edgeWaiting: "waiting", edgeDelivered: "delivered", edgeSkipped: "skipped"}

// itemID is an item's id when it has one.
func itemID(item any) string {
	if x, ok := item.(interface{ GetId() string }); ok {
		return x.GetId()
	}
	return ""
}

func inputIDs(ins []Input) []string {
	out := make([]string, 0, len(ins))
	for _, in := range ins {
		out = append(out, itemID(in.Item))
	}
	return out
}

// Snapshot returns the scheduler's state.
func (s *Scheduler) Snapshot() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := Snapshot{Iterations: map[string]int{}, Total: s.iters.total, Spent: map[string]Spent{},
		Announced: map[string][]string{}, Stopped: map[string]string{}, Causes: map[string]string{},
		Stalls: map[string][]string{}, Joins: map[string]Join{}, Held: map[string][]string{}}
	for k, v := range s.iters.node {
		snap.Iterations[k] = v
	}
	for k, r := range s.iters.recent {
		if len(r) > 0 {
			if snap.Windows == nil {
				snap.Windows = map[string][]time.Time{}
			}
			snap.Windows[k] = append([]time.Time(nil), r...)
		}
	}
	for k, b := range s.budgets {
		snap.Spent[k] = b.spent
		if a := b.announcedList(); len(a) > 0 {
			snap.Announced[k] = a
		}
	}
	for k := range s.stopped {
		if st := s.states[k]; st != nil {
			snap.Stopped[k], snap.Causes[k] = st.Reason, st.Cause
		}
	}
	for k, w := range s.stalls {
		if len(w.last) > 0 {
			snap.Stalls[k] = append([]string(nil), w.last...)
		}
	}
	for k, g := range s.gates {
		switch g := g.(type) {
		case *gateAll:
			j := Join{Edges: map[string]string{}, Queued: map[string][]string{}}
			for _, e := range g.edges {
				j.Edges[e] = edgeStateNames[g.state[e]]
				if q := g.queued[e]; len(q) > 0 {
					j.Queued[e] = inputIDs(q)
				}
			}
			snap.Joins[k] = j
		case *gateManual:
			if len(g.held) > 0 {
				snap.Held[k] = inputIDs(g.held)
			}
		case *gateCron:
			if len(g.held) > 0 {
				snap.Held[k] = inputIDs(g.held)
			}
		}
	}
	return snap
}

// Restore loads a snapshot into a new scheduler (a resume), before Start:
// firing counters, budgets spent and announced thresholds, stall windows,
// nodes stopped by a stall, and the skipped edges of joins. Stops for
// iterations and budgets follow from the restored counters at the next
// Admit; scopes and nodes the graph no longer has are ignored.
func (s *Scheduler) Restore(snap Snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range snap.Iterations {
		s.iters.node[k] = v
	}
	s.iters.total = snap.Total
	for k, r := range snap.Windows {
		s.iters.recent[k] = append([]time.Time(nil), r...)
	}
	for k, sp := range snap.Spent {
		if b := s.budgets[k]; b != nil {
			b.spent = sp
			b.restoreAnnounced(snap.Announced[k])
		}
	}
	for k, last := range snap.Stalls {
		if w := s.stalls[k]; w != nil {
			w.last = append([]string(nil), last...)
		}
	}
	for k, cause := range snap.Causes {
		if cause == CauseStalled && s.states[k] != nil {
			s.stopLocked(k, ErrStalled, CauseStalled, snap.Stopped[k], nil)
		}
	}
	for k, j := range snap.Joins {
		g, ok := s.gates[k].(*gateAll)
		if !ok {
			continue
		}
		edges := make([]string, 0, len(j.Edges))
		for e := range j.Edges {
			edges = append(edges, e)
		}
		sort.Strings(edges)
		for _, e := range edges {
			if j.Edges[e] == "skipped" {
				g.Skip(e)
			}
		}
	}
}
