package scheduler

import (
	"fmt"
	"time"
)

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

// budget tracks one scope (a node, a subgraph, the graph) against its
// limits and remembers which thresholds were announced.
type budget struct {
	scope     string
	limits    Limits
	spent     Spent
	announced map[string]bool // "tokens:80", "cost:100", ...
}

func newBudget(scope string, l Limits) *budget {
	return &budget{scope: scope, limits: l, announced: map[string]bool{}}
}

// fraction is the largest spent/limit ratio and its dimension.
func (b *budget) fractions() map[string]float64 {
	f := map[string]float64{}
	if b.limits.Time > 0 {
		f["time"] = float64(b.spent.Time) / float64(b.limits.Time)
	}
	if b.limits.Tokens > 0 {
		f["tokens"] = float64(b.spent.Tokens) / float64(b.limits.Tokens)
	}
	if b.limits.Cost > 0 {
		f["cost"] = b.spent.Cost / b.limits.Cost
	}
	return f
}

// exceeded says which dimension is spent, "" when none.
func (b *budget) exceeded() string {
	for _, dim := range []string{"time", "tokens", "cost"} {
		if f, ok := b.fractions()[dim]; ok && f >= 1 {
			return dim
		}
	}
	return ""
}

// charge adds usage and returns the threshold events crossed (80% and 100%,
// each announced once).
func (b *budget) charge(node string, u Usage, d time.Duration) []Event {
	b.spent.Time += d
	b.spent.Tokens += u.InputTokens + u.OutputTokens
	b.spent.Cost += u.Cost
	var evs []Event
	for _, dim := range []string{"time", "tokens", "cost"} {
		f, ok := b.fractions()[dim]
		if !ok {
			continue
		}
		for _, pct := range []int{80, 100} {
			key := fmt.Sprintf("%s:%d", dim, pct)
			if f*100 >= float64(pct) && !b.announced[key] {
				b.announced[key] = true
				kind := "budget.threshold"
				if pct == 100 {
					kind = "budget.exceeded"
				}
				evs = append(evs, Event{Kind: kind, Node: node, Reason: fmt.Sprintf("%s budget of %s at %d%%: %s of %s",
					dim, b.scope, pct, b.spentText(dim), b.limitText(dim)),
					Fields: map[string]string{"scope": b.scope, "dimension": dim, "percent": itoa(pct)}})
			}
		}
	}
	return evs
}

func (b *budget) spentText(dim string) string {
	switch dim {
	case "time":
		return b.spent.Time.String()
	case "tokens":
		return fmt.Sprintf("%d tokens", b.spent.Tokens)
	}
	return fmt.Sprintf("$%.4f", b.spent.Cost)
}

func (b *budget) limitText(dim string) string {
	switch dim {
	case "time":
		return b.limits.Time.String()
	case "tokens":
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
