package session

import (
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/switchyard/switchyard/clock"
)

// Rebalancing moves running sessions to members that join later: Place
// spreads only the sessions nobody runs, so six sessions started on one
// member stay there when two more join. A member that runs more than its
// share hands some of its sessions over (Session.Handover: its running
// firings finish, the lease is released at once) and the members' next
// scan places them as any session nobody runs.
//
// Hysteresis keeps sessions from flapping while members come and go: a
// member moves a session only to a member that would then still run fewer
// sessions than it (the loads differ by more than one), only once the
// deployment's members (their ids and labels) have not changed for a
// settle period, and not twice within a settle period (Rebalancer); a
// session it handed over it does not take back through the plan within a
// settle period.

// DefaultSettle is how long the deployment's members must stay the same
// before a member moves running sessions, and the least time between two
// moves of one member.
const DefaultSettle = 10 * time.Second

// Rebalance returns the ids of the sessions of held (those self runs) that
// self hands over: while self runs more than its fair share (the members'
// sessions over the live members, rounded up), the session with the
// greatest id goes to the member with the fewest sessions (ties to the
// smaller id) among the others that may run it, if that member would still
// run fewer sessions than self. A session self may no longer run (a live
// edit changed its placement) goes to such a member whatever the loads.
// members are the live members (self among them or not: self's load is
// len(held)).
func Rebalance(held []Wanted, self Member, members []Member) []string {
	ms := make([]Member, 0, len(members))
	for _, m := range members {
		if m.ID != self.ID {
			ms = append(ms, m)
		}
	}
	if len(ms) == 0 || len(held) == 0 {
		return nil
	}
	sort.Slice(ms, func(i, k int) bool { return ms[i].ID < ms[k].ID })
	mine := len(held)
	total := mine
	load := make([]int, len(ms))
	for i, m := range ms {
		load[i] = max(m.Load, 0)
		total += load[i]
	}
	fair := (total + len(ms)) / (len(ms) + 1) // rounded up
	ws := slices.Clone(held)
	sort.Slice(ws, func(i, k int) bool { return ws[i].ID > ws[k].ID })
	var out []string
	for _, w := range ws {
		misplaced := !self.May(w) // its placement changed (a live edit)
		if mine <= fair && !misplaced {
			continue
		}
		best := -1
		for i, m := range ms {
			if m.May(w) && (best < 0 || load[i] < load[best]) {
				best = i
			}
		}
		if best < 0 || (mine-load[best] <= 1 && !misplaced) {
			continue
		}
		out = append(out, w.ID)
		mine--
		load[best]++
	}
	return out
}

// Rebalancer is a member's hysteresis: whether it may move sessions now.
// Safe for concurrent use.
type Rebalancer struct {
	settle time.Duration
	clk    clock.Clock

	mu    sync.Mutex
	view  string    // the members' ids and labels, as last seen
	since time.Time // when view changed last
	moved time.Time // this member's last move
	gave  map[string]time.Time
}

// NewRebalancer is a Rebalancer with the given settle period (DefaultSettle
// when zero) on clk (the real clock when nil).
func NewRebalancer(settle time.Duration, clk clock.Clock) *Rebalancer {
	if settle <= 0 {
		settle = DefaultSettle
	}
	if clk == nil {
		clk = clock.Real()
	}
	return &Rebalancer{settle: settle, clk: clk, gave: map[string]time.Time{}}
}

// Due reports whether the member may move sessions now, given the live
// members: they have been the same (ids and labels) for the settle
// period, and the member's last move is at least that old.
func (r *Rebalancer) Due(members []Member) bool {
	now := r.clk.Now()
	view := membersView(members)
	r.mu.Lock()
	defer r.mu.Unlock()
	if view != r.view {
		r.view, r.since = view, now
		return false
	}
	return now.Sub(r.since) >= r.settle && (r.moved.IsZero() || now.Sub(r.moved) >= r.settle)
}

// Moved records that the member handed sessions ids over now.
func (r *Rebalancer) Moved(ids []string) {
	now := r.clk.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.moved = now
	for _, id := range ids {
		r.gave[id] = now
	}
}

// Gave reports whether the member handed session id over less than a
// settle period ago: it does not take it back through the plan meanwhile.
func (r *Rebalancer) Gave(id string) bool {
	now := r.clk.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, t := range r.gave {
		if now.Sub(t) >= r.settle {
			delete(r.gave, k)
		}
	}
	_, ok := r.gave[id]
	return ok
}

// membersView is the members' ids and labels, in id order.
func membersView(members []Member) string {
	ms := slices.Clone(members)
	sort.Slice(ms, func(i, k int) bool { return ms[i].ID < ms[k].ID })
	var b strings.Builder
	for _, m := range ms {
		b.WriteString(m.ID)
		b.WriteByte('{')
		b.WriteString(FormatLabels(m.Labels))
		b.WriteString("};")
	}
	return b.String()
}
