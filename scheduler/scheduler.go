package scheduler

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchyard/switchyard/clock"
)

// Scheduler decides for every node of one session: which arrivals fire a
// node (the gates), whether a firing may run now (Admit) and what a
// finished run changes (Release).
//
// A Scheduler is safe for concurrent use: one mutex guards all of its
// state, every method takes it for a short, non-blocking section, and
// notify is never called with it held (timer callbacks only call notify).
// It starts no goroutine of its own; its timers are the clock's.
type Scheduler struct {
	cfg    *Config
	clk    clock.Clock
	notify func(Notice)

	mu      sync.Mutex
	gates   map[string]Gate
	holding map[string]bool // the nodes whose gates hold inputs (all, manual, schedule)
	crons   map[string]*gateCron
	// ticks: per schedule node, the scheduled time of the last tick it
	// fired (set at the firing's Release, so it is committed with the
	// firing's journal record), or when its schedule started. due: per
	// schedule node, the scheduled times of the firings its gate decided
	// and Admit has not yet taken, in order (zero for an explicit trigger).
	ticks    map[string]time.Time
	due      map[string][]time.Time
	late     []string              // the schedule nodes CatchUp fires
	states   map[string]*GateState // made on a node's first change (stateFor): idle until then
	started  time.Time             // when the scheduler was made: the Since of a node never changed
	iters    iterations
	budgets  map[string]*budget
	stalls   map[string]*stallWindow // made on a node's first release (stallFor)
	stopped  map[string]error
	inflight inFlight
	locks    lockTable
	running  map[*Ticket]bool
	watchdog clock.Timer
	windows  map[string]clock.Timer // per node: when its firing window lets it in
	closed   bool
}

// New builds the scheduler of a session. notify is called (never under the
// scheduler's lock) when a timer fires or a wait may end.
func New(cfg *Config, clk clock.Clock, notify func(Notice)) (*Scheduler, error) {
	if clk == nil {
		clk = clock.Real()
	}
	if notify == nil {
		notify = func(Notice) {}
	}
	s := &Scheduler{cfg: cfg, clk: clk, notify: notify, gates: map[string]Gate{}, holding: map[string]bool{}, crons: map[string]*gateCron{},
		ticks: map[string]time.Time{}, due: map[string][]time.Time{},
		states: map[string]*GateState{}, iters: iterations{node: map[string]int{}, recent: map[string][]time.Time{}}, windows: map[string]clock.Timer{}, budgets: map[string]*budget{},
		stalls: map[string]*stallWindow{}, stopped: map[string]error{}, running: map[*Ticket]bool{},
		inflight: inFlight{max: cfg.MaxInFlight}, locks: lockTable{held: map[string]string{}}, started: clk.Now()}
	for scope, l := range cfg.Scopes {
		s.budgets[scope] = newBudget(scope, l)
	}
	ids := make([]string, 0, len(cfg.Nodes))
	for id := range cfg.Nodes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if err := s.addNode(id, cfg.Nodes[id], false); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// addNode builds a node's gate and budget. Its state and stall window are
// made when they first change (an idle node of a large session costs
// neither), except that a node added to a running scheduler (live) is idle
// from now on.
func (s *Scheduler) addNode(id string, nc *NodeConfig, live bool) error {
	g, err := s.newGate(id, nc)
	if err != nil {
		return err
	}
	s.setGate(id, g)
	if c, ok := g.(*gateCron); ok {
		s.crons[id] = c
	}
	if !nc.Budget.empty() {
		s.budgets["node:"+id] = newBudget("node "+id, nc.Budget)
	}
	if live {
		s.states[id] = &GateState{Node: id, State: StateIdle, Since: s.clk.Now()}
	}
	if nc.Trigger == TriggerManual {
		s.setGateWait(id, g.Waiting())
	}
	return nil
}

// setGate makes g node id's gate.
func (s *Scheduler) setGate(id string, g Gate) {
	s.gates[id] = g
	if _, plain := g.(gateAny); plain {
		delete(s.holding, id)
	} else {
		s.holding[id] = true
	}
}

func (s *Scheduler) newGate(id string, nc *NodeConfig) (Gate, error) {
	arm := s.armer(id)
	switch nc.Trigger {
	case TriggerAll:
		return newGateAll(nc.Upstream, joinNeed(nc), nc.JoinTimeout, s.clk, arm), nil
	case TriggerManual:
		return &gateManual{}, nil
	case TriggerSchedule:
		g, err := newGateCron(nc.Schedule, s.clk, arm)
		if err != nil {
			return nil, fmt.Errorf("scheduler: node %s: %w", id, err)
		}
		return g, nil
	}
	return gateAny{}, nil
}

// gateChanged reports whether a node's gate must be rebuilt.
func gateChanged(a, b *NodeConfig) bool {
	return a.Trigger != b.Trigger || a.Join != b.Join || a.Quorum != b.Quorum || a.JoinTimeout != b.JoinTimeout ||
		a.Schedule != b.Schedule || strings.Join(a.Upstream, ",") != strings.Join(b.Upstream, ",")
}

// Reconfigure applies a live edit: nodes missing from cfg are removed,
// new ones added, changed ones updated from their next firing. Counters
// and budgets spent are kept. A node whose gate changes gets a new gate;
// what the old one held is returned, per node, for the owner to offer again.
func (s *Scheduler) Reconfigure(cfg *Config) (map[string][]Input, error) {
	s.mu.Lock()
	held, err := s.reconfigureLocked(cfg)
	wake := append(s.inflight.wakeable(), s.locks.waiting()...)
	s.mu.Unlock()
	// A removed node may have been first in a queue; a raised cap may
	// free slots.
	s.wakeAll(wake, "")
	return held, err
}

func (s *Scheduler) reconfigureLocked(cfg *Config) (map[string][]Input, error) {
	held := map[string][]Input{}
	for id, old := range s.cfg.Nodes {
		nc, kept := cfg.Nodes[id]
		if kept && !gateChanged(old, nc) {
			continue
		}
		if g := s.gates[id]; g != nil {
			held[id] = drainGate(g)
			if c, ok := g.(*gateCron); ok {
				c.stop()
				delete(s.crons, id)
				delete(s.due, id)
				if nc == nil || nc.Trigger != TriggerSchedule {
					delete(s.ticks, id)
				}
			}
			if ga, ok := g.(*gateAll); ok {
				ga.stopTimer()
			}
		}
		if !kept {
			s.inflight.remove(id)
			s.locks.remove(id)
			delete(s.gates, id)
			delete(s.holding, id)
			delete(s.states, id)
			delete(s.stalls, id)
			delete(s.budgets, "node:"+id)
			if _, ok := s.iters.recent[id]; ok {
				// Kept, empty: the next partial snapshot of a node of
				// that id clears the window the journal holds for it.
				s.iters.recent[id] = nil
			}
			if t := s.windows[id]; t != nil {
				t.Stop()
				delete(s.windows, id)
			}
			continue
		}
		g, err := s.newGate(id, nc)
		if err != nil {
			return nil, err
		}
		s.setGate(id, g)
		if c, ok := g.(*gateCron); ok {
			// An edited schedule starts from now: its times before the
			// edit were the old schedule's.
			s.crons[id] = c
			c.start()
			s.ticks[id] = s.clk.Now()
		}
	}
	for id, nc := range cfg.Nodes {
		if _, had := s.cfg.Nodes[id]; had {
			if b := s.budgets["node:"+id]; b != nil {
				b.limits = nc.Budget
			} else if !nc.Budget.empty() {
				s.budgets["node:"+id] = newBudget("node "+id, nc.Budget)
			}
			if w := s.stalls[id]; w != nil {
				w.after = nc.StallAfter
			}
			continue
		}
		if err := s.addNode(id, nc, true); err != nil {
			return nil, err
		}
		if c, ok := s.gates[id].(*gateCron); ok {
			c.start()
			s.ticks[id] = s.clk.Now()
		}
	}
	for scope, l := range cfg.Scopes {
		if b := s.budgets[scope]; b != nil {
			b.limits = l
		} else {
			s.budgets[scope] = newBudget(scope, l)
		}
	}
	s.inflight.max = cfg.MaxInFlight
	s.cfg = cfg
	return held, nil
}

// drainGate takes what a gate holds.
func drainGate(g Gate) []Input {
	switch g := g.(type) {
	case *gateAll:
		var out []Input
		for _, e := range g.edges {
			out = append(out, g.queued[e]...)
		}
		return out
	case *gateManual:
		return g.held
	case *gateCron:
		return g.held
	}
	return nil
}

func joinNeed(nc *NodeConfig) int {
	switch {
	case nc.Join == "any":
		return 1
	case nc.Quorum > 0:
		return nc.Quorum
	}
	return 0
}

// armer returns the timer factory of a node's gate: its timers notify the
// owner, which calls Timer.
func (s *Scheduler) armer(node string) func(time.Duration) clock.Timer {
	return func(d time.Duration) clock.Timer {
		return s.clk.AfterFunc(d, func() { s.notify(Notice{Node: node, Kind: NoticeTimer}) })
	}
}

// Start arms the cron gates and the session's stall watchdog. The owner
// calls it once it holds the session (its lease) and Restore brought the
// journal's state back: a schedule node whose schedule had times after
// its last tick (Snapshot.Ticks) and at or before now is to fire the
// latest of them once, late, when it is no older than the node's
// Catchup — CatchUp fires it; older ones are skipped, and the returned
// cron.missed events say so. A schedule node with no recorded tick
// starts from now.
func (s *Scheduler) Start() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.crons))
	for id := range s.crons {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var evs []Event
	now := s.clk.Now()
	for _, id := range ids {
		g := s.crons[id]
		last, ok := s.ticks[id]
		if !ok || last.After(now) {
			last = now
			s.ticks[id] = now
		}
		e, fire := g.resume(id, last, s.cfg.Nodes[id].Catchup)
		evs = append(evs, e...)
		if fire {
			s.late = append(s.late, id)
		}
		s.setGateWait(id, g.Waiting())
	}
	s.armWatchdog()
	return evs
}

// CatchUp fires the missed cron times Start found (a NoticeTimer each;
// the node's Timer then fires it and arms its next time). The owner calls
// it once a firing can be committed — its journal wired — so that the
// late tick's record carries the tick; until then those nodes wait.
func (s *Scheduler) CatchUp() {
	s.mu.Lock()
	late := s.late
	s.late = nil
	s.mu.Unlock()
	for _, id := range late {
		s.notify(Notice{Node: id, Kind: NoticeTimer})
	}
}

// Close stops every timer.
func (s *Scheduler) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, g := range s.crons {
		g.stop()
	}
	for _, g := range s.gates {
		if ga, ok := g.(*gateAll); ok {
			ga.stopTimer()
		}
	}
	if s.watchdog != nil {
		s.watchdog.Stop()
	}
	for _, t := range s.windows {
		t.Stop()
	}
}

func (s *Scheduler) armWatchdog() {
	if s.cfg.StallTimeout <= 0 || s.closed {
		return
	}
	if s.watchdog == nil {
		s.watchdog = s.clk.AfterFunc(s.cfg.StallTimeout, func() { s.notify(Notice{Kind: NoticeStall}) })
		return
	}
	s.watchdog.Reset(s.cfg.StallTimeout)
}

// Progress records that the session made progress (an envelope consumed,
// an outcome): the stall watchdog starts again.
func (s *Scheduler) Progress() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armWatchdog()
}

// StallTimeout is called on a NoticeStall: it stops every node and
// returns the event. Handlers already running finish (their Release is
// still accepted); nothing new is admitted.
func (s *Scheduler) StallTimeout() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	reason := fmt.Sprintf("no progress for %s (stall_timeout): no envelope consumed and no outcome", s.cfg.StallTimeout)
	fields := map[string]string{"scope": "session", "stall_timeout": s.cfg.StallTimeout.String()}
	for id := range s.cfg.Nodes {
		s.stopLocked(id, ErrStalled, CauseStalled, reason, fields)
	}
	return []Event{{Kind: EventStallDetected, Reason: reason, Fields: fields}}
}

// ErrUnknownNode is the error of a call about a node the scheduler does
// not know (any more: a live edit's Reconfigure removed it).
var ErrUnknownNode = errors.New("scheduler: unknown node")

func (s *Scheduler) gate(node string) (Gate, error) {
	g, ok := s.gates[node]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownNode, node)
	}
	return g, nil
}

// decided records the gate's decision in the node's state: ready when it
// fires, waiting on the gate when it holds. A running node stays running
// (Release settles it). A stopped node's gate still decides: Admit then
// refuses the firing, so that the refusal is on record.
func (s *Scheduler) decided(node string, d Decision) Decision {
	if _, stop := s.stopped[node]; stop {
		return d
	}
	// The stored state, without peekState's idle one made to be thrown
	// away (a node's first decision stores its state below).
	if st := s.states[node]; st != nil && st.State == StateRunning {
		return d
	} else if _, ok := s.gates[node]; st == nil && !ok {
		return d
	}
	switch {
	case d.Fire:
		s.setState(node, StateReady, "", "", nil)
	case d.Reason != "":
		s.setGateWait(node, d.Reason)
	}
	return d
}

// Offer hands the node an arrival (already through its edge's delivery
// buffer): edge is the edge id ("" for the node's inbox), item the
// envelope, opaque here. The Decision says whether the node fires now and
// with which inputs; when it does not, Reason says why (gate state).
func (s *Scheduler) Offer(node, edge string, item any) (Decision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, err := s.gate(node)
	if err != nil {
		return Decision{}, err
	}
	return s.decided(node, g.Offer(Input{Edge: edge, Item: item})), nil
}

// Wants reports whether node's gate would use an arrival on edge now (see
// Gate.Wants); the owner leaves other arrivals in their delivery buffers.
func (s *Scheduler) Wants(node, edge string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.gates[node]
	return ok && g.Wants(edge)
}

// Arrived is Progress and Wants under one lock, for an arrival on edge
// (the owner's every delivery): the session made progress, and wants
// reports whether node's gate would use the arrival now; when it would
// not, waiting is why (Waiting).
func (s *Scheduler) Arrived(node, edge string) (wants bool, waiting string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armWatchdog()
	g, ok := s.gates[node]
	if !ok {
		return false, ""
	}
	if g.Wants(edge) {
		return true, ""
	}
	return false, g.Waiting()
}

// Waiting is why the node's gate holds its arrivals ("" when it does not).
func (s *Scheduler) Waiting(node string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g, ok := s.gates[node]; ok {
		return g.Waiting()
	}
	return ""
}

// Trigger is an explicit trigger (manual nodes; any node on request).
func (s *Scheduler) Trigger(node string) (Decision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, err := s.gate(node)
	if err != nil {
		return Decision{}, err
	}
	return s.decided(node, s.owed(node, g.Trigger())), nil
}

// owed queues the scheduled time of a schedule node's firing (zero for
// an explicit trigger), for Admit to put on its ticket: every firing such
// a node's gate decides goes through Admit in order.
func (s *Scheduler) owed(node string, d Decision) Decision {
	if d.Fire && s.crons[node] != nil {
		s.due[node] = append(s.due[node], d.Scheduled)
	}
	return d
}

// takeDue is the scheduled time of node's next firing, taken off its queue.
func (s *Scheduler) takeDue(node string) time.Time {
	q := s.due[node]
	if len(q) == 0 {
		return time.Time{}
	}
	t := q[0]
	if len(q) == 1 {
		delete(s.due, node)
	} else {
		s.due[node] = q[1:]
	}
	return t
}

// Skip says an upstream edge of node will not deliver this round.
func (s *Scheduler) Skip(node, edge string) (Decision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, err := s.gate(node)
	if err != nil {
		return Decision{}, err
	}
	return s.decided(node, g.Skip(edge)), nil
}

// Timer is called on a node's "timer" notice (join timeout, cron time).
func (s *Scheduler) Timer(node string) (Decision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, err := s.gate(node)
	if err != nil {
		return Decision{}, err
	}
	return s.decided(node, s.owed(node, g.Timer())), nil
}

func itoa(n int) string { return strconv.Itoa(n) }

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
