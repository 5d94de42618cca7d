package graph

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MaxWindowedLimit is the largest count of a windowed limit ("N/window"):
// the scheduler remembers the time of each of the last N firings.
const MaxWindowedLimit = 1_000_000

// Limit is a firing cap: max_iterations or max_visits. N == 0 means no
// cap. With a Window, at most N firings happen in any Window-long span:
// a node at its cap waits for the oldest firing to leave the window, it is
// not stopped. Without one, the node (or the session) stops at N.
type Limit struct {
	N      int
	Window time.Duration
}

// Unlimited reports whether the limit caps nothing.
func (l Limit) Unlimited() bool { return l.N <= 0 }

// String writes the limit as it is written in DOT ("0", "100", "100/1h").
func (l Limit) String() string {
	if l.Window > 0 {
		return strconv.Itoa(l.N) + "/" + FormatDuration(l.Window)
	}
	return strconv.Itoa(l.N)
}

// FormatDuration writes d in the units ParseDuration reads, as the
// largest unit that divides it (1h, 90s, 250ms).
func FormatDuration(d time.Duration) string {
	for _, u := range []struct {
		unit   time.Duration
		suffix string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if d >= u.unit && d%u.unit == 0 {
			return strconv.FormatInt(int64(d/u.unit), 10) + u.suffix
		}
	}
	return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
}

// ParseLimit reads a firing cap: a count (0: none) or a windowed count
// "N/DURATION" (100/1h: at most 100 firings in any hour).
func ParseLimit(text string) (Limit, error) {
	t := strings.TrimSpace(text)
	num, win, windowed := strings.Cut(t, "/")
	n, err := strconv.Atoi(strings.TrimSpace(num))
	if err != nil || n < 0 {
		return Limit{}, fmt.Errorf("want a count >= 0 (0: no limit) or COUNT/DURATION like 100/1h")
	}
	if !windowed {
		return Limit{N: n}, nil
	}
	d, err := ParseDuration(strings.TrimSpace(win))
	if err != nil || d <= 0 {
		return Limit{}, fmt.Errorf("want COUNT/DURATION like 100/1h: the window %q is not a duration > 0", win)
	}
	if n < 1 || n > MaxWindowedLimit {
		return Limit{}, fmt.Errorf("want COUNT/DURATION with 1 <= COUNT <= %d", MaxWindowedLimit)
	}
	return Limit{N: n, Window: d}, nil
}

// attrLimit reads a limit attribute; ok is false when it is unset or
// malformed (the attr_type rule reports that).
func attrLimit(a Attrs, key string) (Limit, bool) {
	v, ok := a[key]
	if !ok {
		return Limit{}, false
	}
	l, err := ParseLimit(v.Text)
	return l, err == nil
}

// IterationLimit is the graph's max_iterations: node firings of the whole
// session. Unset, a pipeline has DefaultMaxIterations and a session
// (kind="session") none.
func (g *Graph) IterationLimit() Limit {
	if l, ok := attrLimit(g.Attrs, "max_iterations"); ok {
		return l
	}
	if g.Kind() == "session" {
		return Limit{}
	}
	return Limit{N: DefaultMaxIterations}
}

// VisitLimit is the graph's max_visits: the cap of every node that sets
// none. Unset, a pipeline has DefaultMaxVisits and a session none.
func (g *Graph) VisitLimit() Limit {
	if l, ok := attrLimit(g.Attrs, "max_visits"); ok {
		return l
	}
	if g.Kind() == "session" {
		return Limit{}
	}
	return Limit{N: DefaultMaxVisits}
}

// VisitLimit is how often the node may fire: its max_iterations, else its
// max_visits, else the graph's VisitLimit.
func (n *Node) VisitLimit(g *Graph) Limit {
	if l, ok := attrLimit(n.Attrs, "max_iterations"); ok {
		return l
	}
	if l, ok := attrLimit(n.Attrs, "max_visits"); ok {
		return l
	}
	if g != nil {
		return g.VisitLimit()
	}
	return Limit{N: DefaultMaxVisits}
}
