package scheduler

import (
	"errors"
	"fmt"
	"sort"
	"time"
)

// ErrBudgetExceeded is the Wait.Err of a node whose budget (its own, its
// subgraph's or the graph's) is spent.
var ErrBudgetExceeded = errors.New("scheduler: budget exceeded")

// Usage is what one handler run consumed.
type Usage struct {
	InputTokens  int64
	OutputTokens int64
	Cost         float64
}

// Spent is what a budget scope has consumed.
type Spent struct {
	Time   time.Duration
	Tokens int64
	Cost   float64
}

// dimension is one of a budget's limits.
type dimension int

const (
	dimTime dimension = iota
	dimTokens
	dimCost
	numDimensions
)

var dimensionNames = [numDimensions]string{"time", "tokens", "cost"}

func (d dimension) String() string { return dimensionNames[d] }

// thresholds are the percentages announced once each, per dimension.
var thresholds = [...]int{80, 100}

// budget tracks one scope (a node, a subgraph, the graph) against its
// limits and remembers which thresholds were announced. A scope's budget
// is charged by every node under it; a node is covered by its own scope,
// then its subgraphs', then the graph's (Scheduler.scopesOf).
type budget struct {
	scope     string
	limits    Limits
	spent     Spent
	announced [numDimensions][len(thresholds)]bool
}

func newBudget(scope string, l Limits) *budget { return &budget{scope: scope, limits: l} }

// fraction is spent/limit in dimension d, and whether d has a limit.
func (b *budget) fraction(d dimension) (float64, bool) {
	switch d {
	case dimTime:
		if b.limits.Time > 0 {
			return float64(b.spent.Time) / float64(b.limits.Time), true
		}
	case dimTokens:
		if b.limits.Tokens > 0 {
			return float64(b.spent.Tokens) / float64(b.limits.Tokens), true
		}
	case dimCost:
		if b.limits.Cost > 0 {
			return b.spent.Cost / b.limits.Cost, true
		}
	}
	return 0, false
}

// exceeded reports the first spent dimension.
func (b *budget) exceeded() (dimension, bool) {
	for d := dimension(0); d < numDimensions; d++ {
		if f, ok := b.fraction(d); ok && f >= 1 {
			return d, true
		}
	}
	return 0, false
}

// charge adds usage and wall time and returns the threshold events crossed
// (80% and 100%, each announced once per dimension).
func (b *budget) charge(node string, u Usage, wall time.Duration) []Event {
	b.spent.Time += wall
	b.spent.Tokens += u.InputTokens + u.OutputTokens
	b.spent.Cost += u.Cost
	var evs []Event
	for d := dimension(0); d < numDimensions; d++ {
		f, ok := b.fraction(d)
		if !ok {
			continue
		}
		for i, pct := range thresholds {
			if f*100 < float64(pct) || b.announced[d][i] {
				continue
			}
			b.announced[d][i] = true
			kind := EventBudgetThreshold
			if pct == 100 {
				kind = EventBudgetExceeded
			}
			evs = append(evs, Event{Kind: kind, Node: node,
				Reason: fmt.Sprintf("%s budget of %s at %d%%: %s of %s", d, b.scope, pct, b.spentText(d), b.limitText(d)),
				Fields: map[string]string{"scope": b.scope, "dimension": d.String(), "percent": itoa(pct),
					"spent": b.spentText(d), "limit": b.limitText(d)}})
		}
	}
	return evs
}

func (b *budget) spentText(d dimension) string {
	switch d {
	case dimTime:
		return b.spent.Time.String()
	case dimTokens:
		return fmt.Sprintf("%d tokens", b.spent.Tokens)
	}
	return fmt.Sprintf("$%.4f", b.spent.Cost)
}

func (b *budget) limitText(d dimension) string {
	switch d {
	case dimTime:
		return b.limits.Time.String()
	case dimTokens:
		return fmt.Sprintf("%d tokens", b.limits.Tokens)
	}
	return fmt.Sprintf("$%.4f", b.limits.Cost)
}

// remaining is the time left, and whether the scope has a time limit.
func (b *budget) remaining() (time.Duration, bool) {
	if b.limits.Time == 0 {
		return 0, false
	}
	return b.limits.Time - b.spent.Time, true
}

// announcedList names the thresholds announced ("tokens:80"), for
// snapshots.
func (b *budget) announcedList() []string {
	var out []string
	for d := dimension(0); d < numDimensions; d++ {
		for i, pct := range thresholds {
			if b.announced[d][i] {
				out = append(out, fmt.Sprintf("%s:%d", d, pct))
			}
		}
	}
	return out
}

// restoreAnnounced marks the thresholds of announcedList as announced.
func (b *budget) restoreAnnounced(list []string) {
	for _, key := range list {
		for d := dimension(0); d < numDimensions; d++ {
			for i, pct := range thresholds {
				if key == fmt.Sprintf("%s:%d", d, pct) {
					b.announced[d][i] = true
				}
			}
		}
	}
}

// BudgetState is one budget scope's limits and what it has spent, for
// metrics and views.
type BudgetState struct {
	// Scope is "graph", a subgraph's name, or "node ID".
	Scope  string
	Limits Limits
	Spent  Spent
}

// Budgets returns every budget scope that has a limit, by scope.
func (s *Scheduler) Budgets() []BudgetState {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]BudgetState, 0, len(s.budgets))
	for _, b := range s.budgets {
		if b.limits.empty() {
			continue
		}
		out = append(out, BudgetState{Scope: b.scope, Limits: b.limits, Spent: b.spent})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Scope < out[j].Scope })
	return out
}
