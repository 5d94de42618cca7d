package scheduler

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Ticket is the right to run a node's handler once. It is returned by
// Admit and handed back to Release exactly once.
type Ticket struct {
	Node  string
	Start time.Time
	// Deadline is when the tightest time budget covering the node runs out
	// (zero: none): the owner puts it on the handler's context.
	Deadline time.Time
	// Scheduled is the cron time a schedule node's firing stands for
	// (zero: none); its Release records it as the node's last tick.
	Scheduled time.Time
}

// Wait is why a node may not run now. Stop means it will never run again
// (max iterations, budget spent, stalled): the owner consumes the firing's
// inputs with the refusal on record. Otherwise the node waits for a slot
// or a lock, and the owner is sent a NoticeAdmit when it may try again.
type Wait struct {
	Stop   bool
	Err    error  // ErrMaxIterations, ErrBudgetExceeded, ErrStalled (Stop only)
	Cause  string // one of the Cause* constants
	Reason string
}

// Admit asks to run node's handler now, after its gate fired. In order it
// checks the stop conditions (the node's and the session's firing caps,
// the budgets covering the node, a stall) and then the waits (a slot under
// max_in_flight, then the node's lock set). It returns a ticket, or a Wait
// saying why not; the events are for the owner to publish.
func (s *Scheduler) Admit(node string) (*Ticket, *Wait, []Event) {
	return s.AdmitIn(node, nil)
}

// AdmitIn is Admit with the ticket made in room when it is not nil (the
// owner's firing's own, which it keeps past the ticket's Release): a
// ticket less to allocate per firing.
func (s *Scheduler) AdmitIn(node string, room *Ticket) (*Ticket, *Wait, []Event) {
	s.mu.Lock()
	t, w, evs, wake := s.admitLocked(node, room)
	s.mu.Unlock()
	s.wakeAll(wake, node)
	return t, w, evs
}

func (s *Scheduler) admitLocked(node string, room *Ticket) (*Ticket, *Wait, []Event, []string) {
	nc := s.cfg.Nodes[node]
	if nc == nil {
		return nil, &Wait{Stop: true, Err: ErrUnknownNode, Reason: "unknown node " + node}, nil, nil
	}
	if err, stop := s.stopped[node]; stop {
		s.takeDue(node)
		st := s.peekState(node)
		return nil, &Wait{Stop: true, Err: err, Cause: st.Cause, Reason: st.Reason}, nil, nil
	}
	stop := func(err error, kind, cause, reason string, fields map[string]string) (*Ticket, *Wait, []Event, []string) {
		s.takeDue(node) // the firing is refused: its time is not owed again
		wake := s.stopLocked(node, err, cause, reason, fields)
		return nil, &Wait{Stop: true, Err: err, Cause: cause, Reason: reason},
			[]Event{{Kind: kind, Node: node, Reason: reason, Fields: fields}}, wake
	}
	now := s.clk.Now()
	if c := s.iters.check(node, nc.MaxIterations, s.cfg.MaxIterations, now); !c.ok {
		if c.until.IsZero() {
			return stop(ErrMaxIterations, EventIterationsExceeded, CauseMaxIterations, c.reason, c.fields)
		}
		// A windowed cap: the node waits for the window to let it in.
		var evs []Event
		if st := s.peekState(node); st == nil || st.State != StateWaiting || st.Cause != CauseIterationWindow {
			evs = []Event{{Kind: EventIterationsWaiting, Node: node, Reason: c.reason, Fields: c.fields}}
		}
		s.setState(node, StateWaiting, CauseIterationWindow, c.reason, c.fields)
		s.armWindow(node, c.until.Sub(now))
		return nil, &Wait{Cause: CauseIterationWindow, Reason: c.reason}, evs, nil
	}
	if b, d, spent := s.spentBudget(node); spent {
		reason, fields := budgetSpent(b, d)
		return stop(ErrBudgetExceeded, EventBudgetExceeded, CauseBudgetSpent, reason, fields)
	}
	if !s.inflight.tryAcquire(node) {
		pos := s.inflight.position(node) + 1
		reason := fmt.Sprintf("in-flight cap: %d of %d handlers running (max_in_flight); waiting %s in line",
			s.inflight.running, s.inflight.max, ordinal(pos))
		fields := map[string]string{"running": itoa(s.inflight.running), "max": itoa(s.inflight.max), "position": itoa(pos)}
		s.setState(node, StateWaiting, CauseInFlightCap, reason, fields)
		return nil, &Wait{Cause: CauseInFlightCap, Reason: reason},
			[]Event{{Kind: EventGateWaiting, Node: node, Reason: reason, Fields: fields}}, nil
	}
	if ok, holder, path, queued := s.locks.tryAcquire(node, nc.Locks); !ok {
		// Give the slot back: the lock is what the node waits for.
		s.inflight.release()
		reason := fmt.Sprintf("lock held: %s holds %s", holder, path)
		if queued {
			reason = fmt.Sprintf("lock held: %s waits first for %s", holder, path)
		}
		fields := map[string]string{"holder": holder, "path": path, "queued": strconv.FormatBool(queued)}
		s.setState(node, StateWaiting, CauseLockHeld, reason, fields)
		return nil, &Wait{Cause: CauseLockHeld, Reason: reason},
			[]Event{{Kind: EventLockWaiting, Node: node, Reason: reason, Fields: fields}}, s.inflight.wakeable()
	}
	var evs []Event
	if len(nc.Locks) > 0 {
		paths := strings.Join(nc.Locks, ",")
		evs = append(evs, Event{Kind: EventLockAcquired, Node: node, Reason: "holds " + paths,
			Fields: map[string]string{"paths": paths}})
	}
	s.iters.count(node, nc.MaxIterations, s.cfg.MaxIterations, now)
	t := room
	if t == nil {
		t = new(Ticket)
	}
	*t = Ticket{Node: node, Start: now, Scheduled: s.takeDue(node)}
	s.eachBudget(node, func(b *budget) {
		if left, ok := b.remaining(); ok {
			if dl := t.Start.Add(left); t.Deadline.IsZero() || dl.Before(t.Deadline) {
				t.Deadline = dl
			}
		}
	})
	s.running[t] = true
	s.setStateAt(node, StateRunning, "", "", nil, now)
	s.armWatchdog()
	return t, nil, evs, nil
}

// armWindow sends node a NoticeAdmit after d, when its firing window
// lets the next firing in (one timer per node).
func (s *Scheduler) armWindow(node string, d time.Duration) {
	if s.closed {
		return
	}
	if t := s.windows[node]; t != nil {
		t.Stop()
	}
	s.windows[node] = s.clk.AfterFunc(d, func() { s.notify(Notice{Node: node, Kind: NoticeAdmit}) })
}

// stopLocked stops a node for good and takes it out of every queue; it
// returns the waiters that may now go.
func (s *Scheduler) stopLocked(node string, err error, cause, reason string, fields map[string]string) []string {
	s.stopped[node] = err
	s.setState(node, StateStopped, cause, reason, fields)
	var wake []string
	if s.inflight.position(node) >= 0 {
		s.inflight.remove(node)
		wake = append(wake, s.inflight.wakeable()...)
	}
	if s.locks.position(node) >= 0 {
		s.locks.remove(node)
		wake = append(wake, s.locks.waiting()...)
	}
	return wake
}

// wakeAll sends NoticeAdmit to each node of wake but self, once each.
// It is called without the lock.
func (s *Scheduler) wakeAll(wake []string, self string) {
	for i, n := range wake {
		if n == self || contains(wake[:i], n) {
			continue
		}
		s.notify(Notice{Node: n, Kind: NoticeAdmit})
	}
}

// nodeScope is the budget scope of a node's own budget.
func nodeScope(node string) string { return "node:" + node }

// scopesOf lists the budget scopes covering a node, innermost first.
func (s *Scheduler) scopesOf(node string) []string {
	out := []string{nodeScope(node)}
	if nc := s.cfg.Nodes[node]; nc != nil {
		out = append(out, nc.Scopes...)
	}
	return out
}

// eachBudget calls fn with every budget covering node, innermost first.
func (s *Scheduler) eachBudget(node string, fn func(*budget)) {
	if len(s.budgets) == 0 {
		return // no budget at all (most sessions): no scope to build and look up
	}
	if b := s.budgets[nodeScope(node)]; b != nil {
		fn(b)
	}
	if nc := s.cfg.Nodes[node]; nc != nil {
		for _, scope := range nc.Scopes {
			if b := s.budgets[scope]; b != nil {
				fn(b)
			}
		}
	}
}

// spentBudget finds a spent budget covering node, innermost first.
func (s *Scheduler) spentBudget(node string) (spent *budget, d dimension, ok bool) {
	s.eachBudget(node, func(b *budget) {
		if !ok {
			if d, ok = b.exceeded(); ok {
				spent = b
			}
		}
	})
	return spent, d, ok
}

func budgetSpent(b *budget, d dimension) (string, map[string]string) {
	return fmt.Sprintf("%s budget of %s is spent: %s of %s", d, b.scope, b.spentText(d), b.limitText(d)),
		map[string]string{"scope": b.scope, "dimension": d.String(), "spent": b.spentText(d), "limit": b.limitText(d)}
}

// Charge adds usage reported during a run (streamed agent usage). When it
// spends a budget, every node under that budget is stopped, and the
// running handlers under it must be cancelled: the owner is sent
// NoticeCancel for each.
func (s *Scheduler) Charge(t *Ticket, u Usage) []Event {
	s.mu.Lock()
	evs, cancel, wake, stopped := s.chargeLocked(t.Node, u, 0)
	s.mu.Unlock()
	for _, n := range cancel {
		s.notify(Notice{Node: n, Kind: NoticeCancel})
	}
	s.notifyStopped(stopped)
	s.wakeAll(wake, "")
	return evs
}

// notifyStopped sends NoticeStopped to each node a budget stopped (called
// without the lock).
func (s *Scheduler) notifyStopped(stopped []string) {
	for _, n := range stopped {
		s.notify(Notice{Node: n, Kind: NoticeStopped})
	}
}

// TakeHeld empties the gate of a stopped node and returns what it held,
// with the reason and cause of the stop; stopped is false (and nothing is
// taken) while the node may still fire.
func (s *Scheduler) TakeHeld(node string) (held []Input, reason string, cause error, stopped bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cause, stopped = s.stopped[node]
	if !stopped {
		return nil, "", nil, false
	}
	if st := s.states[node]; st != nil {
		reason = st.Reason
	}
	switch g := s.gates[node].(type) {
	case *gateAll:
		held = drainGate(g)
		g.stopTimer()
		g.queued, g.state = map[string][]Input{}, map[string]edgeState{}
	case *gateManual:
		held, g.held = g.held, nil
	case *gateCron:
		held, g.held = g.held, nil
	}
	return held, reason, cause, true
}

func (s *Scheduler) chargeLocked(node string, u Usage, wall time.Duration) (evs []Event, cancel, wake, stopped []string) {
	if len(s.budgets) == 0 {
		return nil, nil, nil, nil
	}
	var scopes []string
	if nc := s.cfg.Nodes[node]; nc != nil {
		scopes = nc.Scopes
	}
	for i := -1; i < len(scopes); i++ {
		var scope string
		if i < 0 {
			scope = nodeScope(node)
		} else {
			scope = scopes[i]
		}
		b := s.budgets[scope]
		if b == nil {
			continue
		}
		_, before := b.exceeded()
		evs = append(evs, b.charge(node, u, wall)...)
		d, after := b.exceeded()
		if before || !after {
			continue
		}
		reason, fields := budgetSpent(b, d)
		for id := range s.cfg.Nodes {
			if _, stop := s.stopped[id]; stop || !contains(s.scopesOf(id), scope) {
				continue
			}
			wake = append(wake, s.stopLocked(id, ErrBudgetExceeded, CauseBudgetSpent, reason, fields)...)
			stopped = append(stopped, id)
		}
		for t := range s.running {
			if contains(s.scopesOf(t.Node), scope) && !contains(cancel, t.Node) {
				cancel = append(cancel, t.Node)
			}
		}
	}
	return evs, cancel, wake, stopped
}

// Release ends a run: it charges the budgets with the run's usage and wall
// time, counts the result for stall detection, frees the node's slot and
// locks, and wakes the nodes waiting for them. A ticket is released once;
// a second Release is ignored.
func (s *Scheduler) Release(t *Ticket, r Result) []Event {
	s.mu.Lock()
	if !s.running[t] {
		s.mu.Unlock()
		return nil
	}
	delete(s.running, t)
	if !t.Scheduled.IsZero() && s.crons[t.Node] != nil && t.Scheduled.After(s.ticks[t.Node]) {
		s.ticks[t.Node] = t.Scheduled
	}
	now := s.clk.Now()
	evs, cancel, wake, stopped := s.chargeLocked(t.Node, r.Usage, now.Sub(t.Start))
	if w := s.stallFor(t.Node); w != nil {
		if stalled, evidence := w.observe(r); stalled {
			reason := fmt.Sprintf("node %s stalled: the same input and the same result %d times in a row (%s)", t.Node, w.after, evidence)
			fields := map[string]string{"evidence": evidence, "repeats": itoa(w.after)}
			wake = append(wake, s.stopLocked(t.Node, ErrStalled, CauseStalled, reason, fields)...)
			evs = append(evs, Event{Kind: EventStallDetected, Node: t.Node, Reason: reason, Fields: fields})
		}
	}
	if s.gates[t.Node] != nil {
		s.settle(t.Node, now)
	}
	s.inflight.release()
	wake = append(wake, s.inflight.wakeable()...)
	if nc := s.cfg.Nodes[t.Node]; nc != nil && len(nc.Locks) > 0 || s.locks.heldBy(t.Node) {
		wake = append(wake, s.locks.release(t.Node)...)
		evs = append(evs, Event{Kind: EventLockReleased, Node: t.Node})
	}
	s.armWatchdog()
	s.mu.Unlock()
	for _, n := range cancel {
		s.notify(Notice{Node: n, Kind: NoticeCancel})
	}
	s.notifyStopped(stopped)
	s.wakeAll(wake, t.Node)
	return evs
}

// Stopped reports whether a node will never run again, and why.
func (s *Scheduler) Stopped(node string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	err, ok := s.stopped[node]
	return ok, err
}

// Locks lists the file locks held now, by path, with their holders.
func (s *Scheduler) Locks() []LockHold {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.locks.holds()
}

// ordinal spells 1 as 1st, 2 as 2nd...
func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return itoa(n) + suffix
}
