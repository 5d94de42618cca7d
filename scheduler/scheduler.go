package scheduler

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/switchyard/switchyard/clock"
)

// Sentinels of permanent refusals.
var (
	ErrMaxIterations  = errors.New("scheduler: max iterations reached")
	ErrBudgetExceeded = errors.New("scheduler: budget exceeded")
	ErrStalled        = errors.New("scheduler: stalled")
)

// Event is something the owner publishes on the session's event stream.
type Event struct {
	Kind   string // gate.waiting, lock.waiting, lock.acquired, budget.threshold, budget.exceeded, iterations.exceeded, stall.detected
	Node   string
	Reason string
	Fields map[string]string
}

// Notice asks the owner to call back into the scheduler for a node: Kind
// "timer" (call Timer), "admit" (a slot or lock may be free: try Admit
// again), "cancel" (a budget was crossed during the run: cancel it),
// "stall" (the session made no progress for stall_timeout; Node is "").
type Notice struct {
	Node string
	Kind string
}

// Ticket is the right to run a node's handler once.
type Ticket struct {
	Node  string
	Start time.Time
	// Deadline is when the node's time budget runs out (zero: none): the
	// owner puts it on the handler's context.
	Deadline time.Time
}

// Wait is why a node may not run now. Stop means it will never run again
// (max iterations, budget spent, stalled); otherwise the owner is sent an
// "admit" Notice when it may try again.
type Wait struct {
	Stop   bool
	Err    error
	Reason string
}

// GateState is what a node is doing and, when it is not running, why.
type GateState struct {
	Node   string
	State  string // idle, waiting, running, stopped
	Reason string
	Since  time.Time
}

// Scheduler decides for every node of one session.
type Scheduler struct {
	cfg    *Config
	clk    clock.Clock
	notify func(Notice)

	mu       sync.Mutex
	gates    map[string]Gate
	crons    map[string]*gateCron
	states   map[string]*GateState
	iters    map[string]int
	total    int
	budgets  map[string]*budget
	stalls   map[string]*stallWindow
	stopped  map[string]error
	inflight inFlight
	locks    lockTable
	running  map[*Ticket]bool
	watchdog clock.Timer
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
	s := &Scheduler{cfg: cfg, clk: clk, notify: notify, gates: map[string]Gate{}, crons: map[string]*gateCron{},
		states: map[string]*GateState{}, iters: map[string]int{}, budgets: map[string]*budget{},
		stalls: map[string]*stallWindow{}, stopped: map[string]error{}, running: map[*Ticket]bool{},
		inflight: inFlight{max: cfg.MaxInFlight}, locks: lockTable{held: map[string]string{}}}
	for scope, l := range cfg.Scopes {
		s.budgets[scope] = newBudget(scope, l)
	}
	ids := make([]string, 0, len(cfg.Nodes))
	for id := range cfg.Nodes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		nc := cfg.Nodes[id]
		arm := s.armer(id)
		switch nc.Trigger {
		case TriggerAll:
			s.gates[id] = newGateAll(nc.Upstream, joinNeed(nc), nc.JoinTimeout, clk, arm)
		case TriggerManual:
			s.gates[id] = &gateManual{}
		case TriggerSchedule:
			g, err := newGateCron(nc.Schedule, clk, arm)
			if err != nil {
				return nil, fmt.Errorf("scheduler: node %s: %w", id, err)
			}
			s.gates[id], s.crons[id] = g, g
		default:
			s.gates[id] = gateAny{}
		}
		if !nc.Budget.empty() {
			s.budgets["node:"+id] = newBudget("node "+id, nc.Budget)
		}
		s.stalls[id] = &stallWindow{after: nc.StallAfter}
		s.states[id] = &GateState{Node: id, State: "idle", Since: clk.Now()}
		if w := s.gates[id].Waiting(); w != "" && nc.Trigger == TriggerManual {
			s.states[id].State, s.states[id].Reason = "waiting", w
		}
	}
	return s, nil
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
		return s.clk.AfterFunc(d, func() { s.notify(Notice{Node: node, Kind: "timer"}) })
	}
}

// Start arms the cron gates and the session's stall watchdog.
func (s *Scheduler) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, g := range s.crons {
		g.start()
		s.setState(id, "waiting", g.Waiting())
	}
	s.armWatchdog()
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
}

func (s *Scheduler) armWatchdog() {
	if s.cfg.StallTimeout <= 0 || s.closed {
		return
	}
	if s.watchdog == nil {
		s.watchdog = s.clk.AfterFunc(s.cfg.StallTimeout, func() { s.notify(Notice{Kind: "stall"}) })
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

// StallTimeout is called on a "stall" notice: it stops every node and
// returns the event.
func (s *Scheduler) StallTimeout() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	reason := fmt.Sprintf("no progress for %s (stall_timeout): no envelope consumed and no outcome", s.cfg.StallTimeout)
	for id := range s.cfg.Nodes {
		s.stopped[id] = ErrStalled
		s.setState(id, "stopped", reason)
	}
	return []Event{{Kind: "stall.detected", Reason: reason, Fields: map[string]string{"scope": "session"}}}
}

func (s *Scheduler) setState(node, state, reason string) {
	st := s.states[node]
	if st == nil {
		return
	}
	if st.State != state || st.Reason != reason {
		st.State, st.Reason, st.Since = state, reason, s.clk.Now()
	}
}

func (s *Scheduler) gate(node string) (Gate, error) {
	g, ok := s.gates[node]
	if !ok {
		return nil, fmt.Errorf("scheduler: unknown node %q", node)
	}
	return g, nil
}

// decided records the gate's decision in the node's state.
// A stopped node's gate still decides: Admit then refuses the firing, so
// that the refusal is on record.
func (s *Scheduler) decided(node string, d Decision) Decision {
	if _, stop := s.stopped[node]; stop {
		return d
	}
	if !d.Fire && d.Reason != "" {
		s.setState(node, "waiting", d.Reason)
	} else if d.Fire && s.states[node].State == "waiting" {
		s.setState(node, "idle", "")
	}
	return d
}

// Offer hands the node an arrival (already through its edge's delivery
// buffer).
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
	return s.decided(node, g.Trigger()), nil
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
	d := s.decided(node, g.Timer())
	if c, ok := g.(*gateCron); ok {
		if _, stop := s.stopped[node]; !stop {
			s.setState(node, "waiting", c.Waiting())
		}
	}
	return d, nil
}

// Admit asks to run node's handler now. It returns a ticket, or a Wait
// saying why not (with events to publish).
func (s *Scheduler) Admit(node string) (*Ticket, *Wait, []Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	nc := s.cfg.Nodes[node]
	if nc == nil {
		return nil, &Wait{Stop: true, Reason: "unknown node " + node}, nil
	}
	if err, stop := s.stopped[node]; stop {
		return nil, &Wait{Stop: true, Err: err, Reason: s.states[node].Reason}, nil
	}
	stop := func(err error, kind, reason string, fields map[string]string) (*Ticket, *Wait, []Event) {
		s.stopped[node] = err
		s.setState(node, "stopped", reason)
		return nil, &Wait{Stop: true, Err: err, Reason: reason}, []Event{{Kind: kind, Node: node, Reason: reason, Fields: fields}}
	}
	if nc.MaxIterations > 0 && s.iters[node] >= nc.MaxIterations {
		return stop(ErrMaxIterations, "iterations.exceeded",
			fmt.Sprintf("node %s reached its limit of %d firings (max_iterations / max_visits)", node, nc.MaxIterations),
			map[string]string{"limit": itoa(nc.MaxIterations), "scope": "node"})
	}
	if s.cfg.MaxIterations > 0 && s.total >= s.cfg.MaxIterations {
		return stop(ErrMaxIterations, "iterations.exceeded",
			fmt.Sprintf("the session reached its limit of %d node firings (graph max_iterations)", s.cfg.MaxIterations),
			map[string]string{"limit": itoa(s.cfg.MaxIterations), "scope": "graph"})
	}
	for _, scope := range s.scopesOf(node) {
		if b := s.budgets[scope]; b != nil {
			if dim := b.exceeded(); dim != "" {
				return stop(ErrBudgetExceeded, "budget.exceeded",
					fmt.Sprintf("%s budget of %s is spent: %s of %s", dim, b.scope, b.spentText(dim), b.limitText(dim)),
					map[string]string{"scope": b.scope, "dimension": dim})
			}
		}
	}
	if !s.inflight.tryAcquire(node) {
		reason := fmt.Sprintf("in-flight cap: %d of %d handlers running (max_in_flight)", s.inflight.running, s.inflight.max)
		s.setState(node, "waiting", reason)
		return nil, &Wait{Reason: reason}, []Event{{Kind: "gate.waiting", Node: node, Reason: reason}}
	}
	if ok, holder, path := s.locks.tryAcquire(node, nc.Locks); !ok {
		s.inflight.running-- // give the slot back: the lock is what we wait for
		reason := fmt.Sprintf("lock held: %s holds %s", holder, path)
		s.setState(node, "waiting", reason)
		return nil, &Wait{Reason: reason}, []Event{{Kind: "lock.waiting", Node: node, Reason: reason,
			Fields: map[string]string{"holder": holder, "path": path}}}
	}
	var evs []Event
	if len(nc.Locks) > 0 {
		evs = append(evs, Event{Kind: "lock.acquired", Node: node, Reason: "holds " + joinComma(nc.Locks)})
	}
	s.iters[node]++
	s.total++
	t := &Ticket{Node: node, Start: s.clk.Now()}
	for _, scope := range s.scopesOf(node) {
		if b := s.budgets[scope]; b != nil {
			if left, ok := b.remaining(); ok {
				if dl := t.Start.Add(left); t.Deadline.IsZero() || dl.Before(t.Deadline) {
					t.Deadline = dl
				}
			}
		}
	}
	s.running[t] = true
	s.setState(node, "running", "")
	s.armWatchdog()
	return t, nil, evs
}

// scopesOf lists the budget scopes covering a node, innermost first.
func (s *Scheduler) scopesOf(node string) []string {
	out := []string{"node:" + node}
	if nc := s.cfg.Nodes[node]; nc != nil {
		out = append(out, nc.Scopes...)
	}
	return out
}

// Charge adds usage reported during a run (streamed agent usage). When it
// spends a budget, the running handlers under it must be cancelled: the
// owner is sent "cancel" notices.
func (s *Scheduler) Charge(t *Ticket, u Usage) []Event {
	s.mu.Lock()
	evs, cancel := s.chargeLocked(t.Node, u, 0)
	s.mu.Unlock()
	for _, n := range cancel {
		s.notify(Notice{Node: n, Kind: "cancel"})
	}
	return evs
}

func (s *Scheduler) chargeLocked(node string, u Usage, d time.Duration) ([]Event, []string) {
	var evs []Event
	var cancel []string
	for _, scope := range s.scopesOf(node) {
		b := s.budgets[scope]
		if b == nil {
			continue
		}
		before := b.exceeded()
		evs = append(evs, b.charge(node, u, d)...)
		if before == "" && b.exceeded() != "" {
			for t := range s.running {
				if t.Node == node || scope != "node:"+node && contains(s.scopesOf(t.Node), scope) {
					cancel = append(cancel, t.Node)
				}
			}
		}
	}
	return evs, cancel
}

// Release ends a run: it charges the budgets with its usage and wall time,
// checks for a stall, and frees the node's slot and locks.
func (s *Scheduler) Release(t *Ticket, r Result) []Event {
	s.mu.Lock()
	if !s.running[t] {
		s.mu.Unlock()
		return nil
	}
	delete(s.running, t)
	d := s.clk.Now().Sub(t.Start)
	evs, cancel := s.chargeLocked(t.Node, r.Usage, d)
	if stalled, evidence := s.stalls[t.Node].observe(r); stalled {
		n := s.cfg.Nodes[t.Node].StallAfter
		reason := fmt.Sprintf("node %s stalled: the same result %d times in a row (%s)", t.Node, n, evidence)
		s.stopped[t.Node] = ErrStalled
		s.setState(t.Node, "stopped", reason)
		evs = append(evs, Event{Kind: "stall.detected", Node: t.Node, Reason: reason,
			Fields: map[string]string{"evidence": evidence, "repeats": strconv.Itoa(n)}})
	} else if _, stop := s.stopped[t.Node]; !stop {
		s.setState(t.Node, "idle", "")
		if w := s.gates[t.Node].Waiting(); w != "" {
			s.setState(t.Node, "waiting", w)
		}
	}
	var wake []string
	if next := s.inflight.release(); next != "" {
		wake = append(wake, next)
	}
	if len(s.cfg.Nodes[t.Node].Locks) > 0 {
		wake = append(wake, s.locks.release(t.Node)...)
		evs = append(evs, Event{Kind: "lock.released", Node: t.Node})
	}
	s.armWatchdog()
	s.mu.Unlock()
	for _, n := range cancel {
		s.notify(Notice{Node: n, Kind: "cancel"})
	}
	for _, n := range wake {
		if n != t.Node {
			s.notify(Notice{Node: n, Kind: "admit"})
		}
	}
	return evs
}

// Stopped reports whether a node will never run again, and why.
func (s *Scheduler) Stopped(node string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	err, ok := s.stopped[node]
	return ok, err
}

// States returns every node's gate state, by node id.
func (s *Scheduler) States() []GateState {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]GateState, 0, len(s.states))
	for _, st := range s.states {
		out = append(out, *st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}

// Explain answers "why is this node not running?".
func (s *Scheduler) Explain(node string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.states[node]
	if st == nil {
		return "no node " + node
	}
	nc := s.cfg.Nodes[node]
	msg := fmt.Sprintf("%s is %s", node, st.State)
	if st.Reason != "" {
		msg += ": " + st.Reason
	}
	msg += fmt.Sprintf(" (since %s; trigger %s; %d of %d firings", st.Since.UTC().Format(time.RFC3339), nc.Trigger, s.iters[node], nc.MaxIterations)
	for _, scope := range s.scopesOf(node) {
		if b := s.budgets[scope]; b != nil {
			for dim, f := range b.fractions() {
				msg += fmt.Sprintf("; %s %s budget %.0f%% spent", b.scope, dim, f*100)
			}
		}
	}
	return msg + ")"
}

// Snapshot is the scheduler's counters, for checkpoints.
type Snapshot struct {
	Iterations map[string]int    `json:"iterations"`
	Total      int               `json:"total"`
	Spent      map[string]Spent  `json:"spent"`
	Stopped    map[string]string `json:"stopped,omitempty"`
}

// Snapshot returns the counters.
func (s *Scheduler) Snapshot() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := Snapshot{Iterations: map[string]int{}, Total: s.total, Spent: map[string]Spent{}, Stopped: map[string]string{}}
	for k, v := range s.iters {
		snap.Iterations[k] = v
	}
	for k, b := range s.budgets {
		snap.Spent[k] = b.spent
	}
	for k, err := range s.stopped {
		snap.Stopped[k] = s.states[k].Reason
		_ = err
	}
	return snap
}

// Restore loads counters from a snapshot (after a resume): iterations and
// budgets are not reset.
func (s *Scheduler) Restore(snap Snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range snap.Iterations {
		s.iters[k] = v
	}
	s.total = snap.Total
	for k, sp := range snap.Spent {
		if b := s.budgets[k]; b != nil {
			b.spent = sp
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func joinComma(s []string) string {
	out := ""
	for i, v := range s {
		if i > 0 {
			out += ","
		}
		out += v
	}
	return out
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
