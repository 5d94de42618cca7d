package scheduler

import (
	"fmt"

	"github.com/switchyard/switchyard/graph"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Node states.
const (
	StateIdle    = "idle"    // nothing held, nothing to do
	StateWaiting = "waiting" // held back: Cause says by what
	StateReady   = "ready"   // the gate fired; admission not asked yet
	StateRunning = "running" // a handler runs under a Ticket
	StateStopped = "stopped" // will never run again: Cause says why
)

// Causes of a wait or a stop (GateState.Cause).
const (
	CauseJoinIncomplete  = "join_incomplete"  // Fields: missing, need, upstream
	CauseManualPending   = "manual_pending"   // Fields: held
	CauseNextCron        = "next_cron"        // Fields: next (RFC 3339), held
	CauseInFlightCap     = "in_flight_cap"    // Fields: running, max, position
	CauseLockHeld        = "lock_held"        // Fields: holder, path (queued=true: an earlier waiter goes first)
	CauseBudgetSpent     = "budget_spent"     // Fields: scope, dimension, spent, limit
	CauseMaxIterations   = "max_iterations"   // Fields: scope, limit
	CauseIterationWindow = "iteration_window" // Fields: scope, limit (N/window), until (RFC 3339)
	CauseStalled         = "stalled"          // Fields: evidence, repeats (or scope=session)
)

// GateState is what a node is doing and, when it is not running, why.
type GateState struct {
	Node   string
	State  string // one of the State* constants
	Cause  string // one of the Cause* constants; "" when idle, ready or running
	Reason string // the cause in words
	// Fields is the cause's evidence (see the Cause* constants).
	Fields map[string]string
	Since  time.Time
}

// peekState is a node's state, nil for a node the scheduler does not have.
// A node whose state never changed has none stored: it is idle since the
// scheduler was made, and peekState returns that without storing it.
func (s *Scheduler) peekState(node string) *GateState {
	if st := s.states[node]; st != nil {
		return st
	}
	if _, ok := s.gates[node]; !ok {
		return nil
	}
	return &GateState{Node: node, State: StateIdle, Since: s.started}
}

// stateFor is a node's state, stored so that it may be changed; nil for a
// node the scheduler does not have.
func (s *Scheduler) stateFor(node string) *GateState {
	st := s.states[node]
	if st == nil {
		if st = s.peekState(node); st != nil {
			s.states[node] = st
		}
	}
	return st
}

// setState records a node's state; Since changes only with the state or
// its cause.
func (s *Scheduler) setState(node, state, cause, reason string, fields map[string]string) {
	s.setStateAt(node, state, cause, reason, fields, time.Time{})
}

// setStateAt is setState at now, read from the clock when zero (a caller
// that has just read it passes it: one clock read less per admission).
func (s *Scheduler) setStateAt(node, state, cause, reason string, fields map[string]string, now time.Time) {
	st := s.stateFor(node)
	if st == nil {
		return
	}
	if st.State != state || st.Cause != cause {
		if now.IsZero() {
			now = s.clk.Now()
		}
		st.Since = now
	}
	st.State, st.Cause, st.Reason, st.Fields = state, cause, reason, fields
}

// setGateWait records that a node's gate holds it back. The evidence is
// read from the gate when asked for (States, Explain), which keeps the
// per-envelope path cheap.
func (s *Scheduler) setGateWait(node, reason string) {
	g := s.gates[node]
	c, ok := g.(causer)
	if !ok {
		return
	}
	cause := c.cause()
	st := s.stateFor(node)
	if st == nil {
		return
	}
	if st.State != StateWaiting || st.Cause != cause {
		st.Since = s.clk.Now()
	}
	st.State, st.Cause, st.Reason, st.Fields = StateWaiting, cause, reason, nil
}

// settle puts a node that is neither running nor stopped back into the
// state its gate implies: waiting on the gate, or idle (since now, the
// release's clock reading).
func (s *Scheduler) settle(node string, now time.Time) {
	if _, stop := s.stopped[node]; stop {
		return
	}
	if w := s.gates[node].Waiting(); w != "" {
		s.setGateWait(node, w)
		return
	}
	s.setStateAt(node, StateIdle, "", "", nil, now)
}

// stateOf returns a copy of a node's state with its evidence filled in.
func (s *Scheduler) stateOf(node string) (GateState, bool) {
	st := s.peekState(node)
	if st == nil {
		return GateState{}, false
	}
	out := *st
	if out.Fields == nil {
		if c, ok := s.gates[node].(causer); ok && out.State == StateWaiting {
			if c.cause() == out.Cause {
				out.Fields = c.evidence()
				out.Reason = s.gates[node].Waiting()
			}
		}
	} else {
		out.Fields = make(map[string]string, len(st.Fields))
		for k, v := range st.Fields {
			out.Fields[k] = v
		}
	}
	return out, true
}

// State returns one node's gate state.
func (s *Scheduler) State(node string) (GateState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stateOf(node)
}

// States returns every node's gate state, by node id.
func (s *Scheduler) States() []GateState {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]GateState, 0, len(s.gates))
	for id := range s.gates {
		st, _ := s.stateOf(id)
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}

// Explain answers "why is this node not running?" in one paragraph: the
// state and its cause, then the node's counters, budgets and locks.
func (s *Scheduler) Explain(node string) string { return s.ExplainHeld(node, 0) }

// ExplainHeld is Explain for a node whose owner holds buffered more
// arrivals in its delivery buffers (the gate has not taken them yet): they
// count in the evidence's held.
func (s *Scheduler) ExplainHeld(node string, buffered int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.stateOf(node)
	if !ok {
		return "no node " + node
	}
	nc := s.cfg.Nodes[node]
	var b strings.Builder
	fmt.Fprintf(&b, "%s is %s", node, st.State)
	if st.Reason != "" {
		b.WriteString(": " + st.Reason)
	}
	fmt.Fprintf(&b, " (since %s; trigger %s; %d firings, %s", st.Since.UTC().Format(time.RFC3339), nc.Trigger,
		s.iters.node[node], limitText(nc.MaxIterations))
	if s.cfg.MaxIterations.N > 0 {
		fmt.Fprintf(&b, "; session %d firings, %s", s.iters.total, limitText(s.cfg.MaxIterations))
	}
	for _, scope := range s.scopesOf(node) {
		if bu := s.budgets[scope]; bu != nil {
			for d := dimension(0); d < numDimensions; d++ {
				if f, ok := bu.fraction(d); ok {
					fmt.Fprintf(&b, "; %s %s budget %.0f%% spent (%s of %s)", bu.scope, d, f*100, bu.spentText(d), bu.limitText(d))
				}
			}
		}
	}
	if w := s.gates[node].Waiting(); w != "" && w != st.Reason {
		fmt.Fprintf(&b, "; gate: %s", w)
	}
	if len(nc.Locks) > 0 {
		fmt.Fprintf(&b, "; locks %s", strings.Join(nc.Locks, ","))
	}
	fields := st.Fields
	if buffered > 0 {
		fields = make(map[string]string, len(st.Fields)+1)
		for k, v := range st.Fields {
			fields[k] = v
		}
		held, _ := strconv.Atoi(fields["held"])
		fields["held"] = strconv.Itoa(held + buffered)
	}
	if keys := sortedKeys(fields); len(keys) > 0 {
		b.WriteString("; evidence")
		for _, k := range keys {
			fmt.Fprintf(&b, " %s=%s", k, fields[k])
		}
	}
	b.WriteString(")")
	return b.String()
}

// limitText says a firing cap in words.
func limitText(l graph.Limit) string {
	switch {
	case l.N <= 0:
		return "no firing limit"
	case l.Window > 0:
		return "at most " + itoa(l.N) + " per " + graph.FormatDuration(l.Window)
	}
	return "limit " + itoa(l.N)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
