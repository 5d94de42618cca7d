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
	// Ticks: per schedule node, the scheduled time of the last tick it
	// fired, or when its schedule started (Scheduler.Start).
	Ticks map[string]time.Time `json:"ticks,omitempty"`
	// Partial marks a snapshot of what one node's firing changes
	// (SnapshotOf), to be merged into the state before it (Merge).
	Partial bool `json:"partial,omitempty"`
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
		if st := s.peekState(k); st != nil {
			snap.Stopped[k], snap.Causes[k] = st.Reason, st.Cause
		}
	}
	for k, w := range s.stalls {
		if len(w.last) > 0 {
			snap.Stalls[k] = append([]string(nil), w.last...)
		}
	}
	for k := range s.holding {
		s.gateSnapshot(&snap, k, s.gates[k])
	}
	s.ticksSnapshot(&snap)
	return snap
}

// ticksSnapshot records every schedule node's last tick: there are few,
// and a record of any node's firing carries them (the start of a schedule
// is committed with the first record, whichever node writes it).
func (s *Scheduler) ticksSnapshot(snap *Snapshot) {
	for k, t := range s.ticks {
		if snap.Ticks == nil {
			snap.Ticks = make(map[string]time.Time, len(s.ticks))
		}
		snap.Ticks[k] = t
	}
}

// SnapshotOf is the part of the state a firing of node changes (node "":
// none): node's counter, stall window and firing window, the budgets that
// cover it, the session's total and firing window; and whole the parts
// that do not grow with the graph: stops, joins and held inputs. Merge
// applies it to the snapshot before. It costs what node touches, not the
// size of the graph: a durable session writes one with every journal
// record (a whole Snapshot per record made a long pipeline's journal
// quadratic).
func (s *Scheduler) SnapshotOf(node string) Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	// The maps a firing leaves empty are not made (nil: none, as Merge
	// reads them): a durable session makes one of these per record.
	snap := Snapshot{Partial: true, Total: s.iters.total, Iterations: map[string]int{}}
	// A firing window is set only for a scope a windowed cap counted
	// (iterations.remember; a restore): no other has a window to change,
	// here or in the state merged before (a key it once had stays, empty,
	// and sets it empty).
	window := func(k string) {
		r, ok := s.iters.recent[k]
		if !ok {
			return
		}
		if snap.Windows == nil {
			snap.Windows = map[string][]time.Time{}
		}
		snap.Windows[k] = append([]time.Time(nil), r...)
	}
	window("")
	spent := func(k string, b *budget) {
		if snap.Spent == nil {
			snap.Spent, snap.Announced = map[string]Spent{}, map[string][]string{}
		}
		snap.Spent[k], snap.Announced[k] = b.spent, b.announcedList()
	}
	if node != "" {
		if _, ok := s.gates[node]; ok {
			snap.Iterations[node] = s.iters.node[node]
			window(node)
			if w := s.stalls[node]; w != nil {
				snap.Stalls = map[string][]string{node: append([]string(nil), w.last...)}
			}
		}
		if len(s.budgets) > 0 { // no scope to build and look up without a budget (most sessions)
			for _, k := range s.scopesOf(node) {
				if b := s.budgets[k]; b != nil {
					spent(k, b)
				}
			}
		}
	}
	for k := range s.cfg.Scopes { // the graph's and subgraphs' budgets: few
		if b := s.budgets[k]; b != nil {
			spent(k, b)
		}
	}
	for k := range s.stopped {
		if st := s.states[k]; st != nil {
			if snap.Stopped == nil {
				snap.Stopped, snap.Causes = map[string]string{}, map[string]string{}
			}
			snap.Stopped[k], snap.Causes[k] = st.Reason, st.Cause
		}
	}
	for k := range s.holding {
		s.gateSnapshot(&snap, k, s.gates[k])
	}
	s.ticksSnapshot(&snap)
	return snap
}

// Count is SnapshotOf(node) when that holds no more than node's counter,
// the session's total and node's stall window (CountOf).
type Count struct {
	Total, N int
	// Watched: node has a stall window, whose last releases are Stalls (a
	// copy; empty sets it empty).
	Watched bool
	Stalls  []string
}

// CountOf is SnapshotOf(node) as a Count when that is all it holds (ok):
// node is gated, and neither node nor the session has a firing window, and
// no budget, stop, held input or tick is kept — most firings of most
// sessions. A durable session writes it with each journal record without
// building the maps of a Snapshot (SnapshotOf otherwise).
func (s *Scheduler) CountOf(node string) (c Count, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if node == "" || len(s.budgets) > 0 || len(s.stopped) > 0 || len(s.holding) > 0 || len(s.ticks) > 0 {
		return Count{}, false
	}
	if _, gated := s.gates[node]; !gated {
		return Count{}, false
	}
	if len(s.iters.recent) > 0 {
		if _, w := s.iters.recent[""]; w {
			return Count{}, false
		}
		if _, w := s.iters.recent[node]; w {
			return Count{}, false
		}
	}
	c = Count{Total: s.iters.total, N: s.iters.node[node]}
	if w := s.stalls[node]; w != nil {
		c.Watched, c.Stalls = true, append([]string(nil), w.last...)
	}
	return c, true
}

// Merge applies p over snap: a whole snapshot replaces it; a partial one
// (SnapshotOf) sets what it holds.
func (snap *Snapshot) Merge(p Snapshot) {
	if !p.Partial {
		*snap = p
		return
	}
	if snap.Iterations == nil {
		snap.Iterations = map[string]int{}
	}
	for k, v := range p.Iterations {
		snap.Iterations[k] = v
	}
	snap.Total = p.Total
	if snap.Spent == nil {
		snap.Spent = map[string]Spent{}
	}
	for k, v := range p.Spent {
		snap.Spent[k] = v
	}
	setLists(&snap.Announced, p.Announced)
	setLists(&snap.Stalls, p.Stalls)
	if len(p.Windows) > 0 && snap.Windows == nil {
		snap.Windows = map[string][]time.Time{}
	}
	for k, v := range p.Windows {
		if len(v) == 0 {
			delete(snap.Windows, k)
		} else {
			snap.Windows[k] = v
		}
	}
	snap.Stopped, snap.Causes, snap.Joins, snap.Held = p.Stopped, p.Causes, p.Joins, p.Held
	if len(p.Ticks) > 0 && snap.Ticks == nil {
		snap.Ticks = map[string]time.Time{}
	}
	for k, t := range p.Ticks {
		snap.Ticks[k] = t
	}
}

// setLists sets p's lists in *m, an empty one removing its key.
func setLists(m *map[string][]string, p map[string][]string) {
	if len(p) > 0 && *m == nil {
		*m = map[string][]string{}
	}
	for k, v := range p {
		if len(v) == 0 {
			delete(*m, k)
		} else {
			(*m)[k] = v
		}
	}
}

// gateSnapshot records what the gate of node k holds (joins, held inputs).
func (s *Scheduler) gateSnapshot(snap *Snapshot, k string, g Gate) {
	switch g := g.(type) {
	case *gateAll:
		j := Join{Edges: map[string]string{}, Queued: map[string][]string{}}
		for _, e := range g.edges {
			j.Edges[e] = edgeStateNames[g.state[e]]
			if q := g.queued[e]; len(q) > 0 {
				j.Queued[e] = inputIDs(q)
			}
		}
		if snap.Joins == nil {
			snap.Joins = map[string]Join{}
		}
		snap.Joins[k] = j
	case *gateManual:
		if len(g.held) > 0 {
			snap.hold(k, inputIDs(g.held))
		}
	case *gateCron:
		if len(g.held) > 0 {
			snap.hold(k, inputIDs(g.held))
		}
	}
}

// hold records the ids of the inputs node k holds.
func (snap *Snapshot) hold(k string, ids []string) {
	if snap.Held == nil {
		snap.Held = map[string][]string{}
	}
	snap.Held[k] = ids
}

// Restore loads a snapshot into a new scheduler (a resume), before Start:
// firing counters, budgets spent and announced thresholds, stall windows,
// nodes stopped by a stall, the skipped edges of joins, and the schedule
// nodes' last ticks (for Start's catch-up). Stops for
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
	for k, t := range snap.Ticks {
		if s.crons[k] != nil {
			s.ticks[k] = t
		}
	}
	for k, sp := range snap.Spent {
		if b := s.budgets[k]; b != nil {
			b.spent = sp
			b.restoreAnnounced(snap.Announced[k])
		}
	}
	for k, last := range snap.Stalls {
		if w := s.stallFor(k); w != nil {
			w.restore(last)
		}
	}
	for k, cause := range snap.Causes {
		if cause == CauseStalled && s.gates[k] != nil {
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
