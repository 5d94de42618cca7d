package scheduler

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/switchyard/switchyard/clock"
)

// edgeState is a join's view of one upstream edge.
type edgeState int

const (
	edgeWaiting edgeState = iota
	edgeDelivered
	edgeSkipped
)

// gateAll joins upstream edges: it fires once every edge has delivered (or
// was skipped) since the last firing — or any one of them (join=any), or N
// of them (quorum:N). With a timeout it fires with what it has when the
// first arrival has waited that long.
type gateAll struct {
	edges   []string
	need    int // edges that must deliver; 0 = all
	timeout time.Duration
	clk     clock.Clock
	arm     func(d time.Duration) clock.Timer // arms the join timeout timer

	state   map[string]edgeState
	queued  map[string][]Input // arrivals per edge, oldest first
	timer   clock.Timer
	started bool
}

func newGateAll(edges []string, need int, timeout time.Duration, clk clock.Clock, arm func(time.Duration) clock.Timer) *gateAll {
	g := &gateAll{edges: append([]string(nil), edges...), need: need, timeout: timeout, clk: clk, arm: arm,
		state: map[string]edgeState{}, queued: map[string][]Input{}}
	sort.Strings(g.edges)
	return g
}

func (g *gateAll) satisfied() bool {
	done := 0
	for _, e := range g.edges {
		if g.state[e] != edgeWaiting {
			done++
		}
	}
	if g.need > 0 {
		return done >= g.need
	}
	return done == len(g.edges)
}

func (g *gateAll) missing() []string {
	var out []string
	for _, e := range g.edges {
		if g.state[e] == edgeWaiting {
			out = append(out, e)
		}
	}
	return out
}

// fire takes one arrival from every edge that delivered and resets the
// edges for the next round (edges with more queued arrivals stay delivered).
func (g *gateAll) fire() Decision {
	d := Decision{Fire: true, Missing: g.missing()}
	for _, e := range g.edges {
		q := g.queued[e]
		if len(q) > 0 {
			d.Inputs = append(d.Inputs, q[0])
			g.queued[e] = q[1:]
		}
		if len(g.queued[e]) > 0 {
			g.state[e] = edgeDelivered
		} else {
			g.state[e] = edgeWaiting
		}
	}
	g.stopTimer()
	if g.anyDelivered() {
		g.startTimer()
	}
	return d
}

func (g *gateAll) anyDelivered() bool {
	for _, e := range g.edges {
		if g.state[e] == edgeDelivered {
			return true
		}
	}
	return false
}

func (g *gateAll) startTimer() {
	if g.timeout > 0 && g.timer == nil {
		g.timer = g.arm(g.timeout)
	}
}

func (g *gateAll) stopTimer() {
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
	}
}

func (g *gateAll) Offer(in Input) Decision {
	if _, known := g.stateOf(in.Edge); !known {
		// An arrival outside the joined edges (the inbox) fires on its own.
		return Decision{Fire: true, Inputs: []Input{in}}
	}
	g.queued[in.Edge] = append(g.queued[in.Edge], in)
	g.state[in.Edge] = edgeDelivered
	if g.satisfied() {
		return g.fire()
	}
	g.startTimer()
	return Decision{Reason: g.Waiting()}
}

func (g *gateAll) stateOf(edge string) (edgeState, bool) {
	for _, e := range g.edges {
		if e == edge {
			return g.state[e], true
		}
	}
	return 0, false
}

func (g *gateAll) Skip(edge string) Decision {
	if st, known := g.stateOf(edge); !known || st == edgeDelivered {
		return Decision{Reason: g.Waiting()}
	}
	g.state[edge] = edgeSkipped
	if g.satisfied() && g.anyDelivered() {
		return g.fire()
	}
	return Decision{Reason: g.Waiting()}
}

// Trigger fires with whatever has arrived.
func (g *gateAll) Trigger() Decision { return g.fire() }

// Timer is the join timeout: fire with what arrived.
func (g *gateAll) Timer() Decision {
	g.timer = nil
	if !g.anyDelivered() {
		return Decision{}
	}
	return g.fire()
}

func (g *gateAll) Waiting() string {
	m := g.missing()
	if len(m) == 0 {
		return ""
	}
	want := "every one"
	if g.need > 0 {
		want = fmt.Sprintf("%d", g.need)
	}
	return fmt.Sprintf("join incomplete: needs %s of %d upstream edges; missing %s", want, len(g.edges), strings.Join(m, ", "))
}

// Wants an arrival on an edge that has not delivered this round.
func (g *gateAll) Wants(edge string) bool {
	st, known := g.stateOf(edge)
	return !known || st == edgeWaiting
}

func (g *gateAll) cause() string { return CauseJoinIncomplete }

func (g *gateAll) evidence() map[string]string {
	need := "all"
	if g.need > 0 {
		need = itoa(g.need)
	}
	return map[string]string{"missing": strings.Join(g.missing(), ","), "need": need,
		"upstream": itoa(len(g.edges))}
}

var _ interface {
	Gate
	causer
} = (*gateAll)(nil)
