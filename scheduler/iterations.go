package scheduler

import (
	"errors"
	"fmt"
	"time"

	"github.com/switchyard/switchyard/graph"
)

// ErrMaxIterations is the Wait.Err of a node that reached its firing cap
// (max_iterations or max_visits) or whose session reached the graph's
// max_iterations.
var ErrMaxIterations = errors.New("scheduler: max iterations reached")

// iterations counts firings per node and for the session. A firing counts
// when it is admitted (Admit), so a cycle A ⇄ B stops at the first cap it
// reaches whether or not its handlers succeed. Windowed caps (N/window)
// also keep the times of the last N firings of their scope, so a node at
// its cap waits until the oldest leaves the window.
type iterations struct {
	node  map[string]int
	total int
	// recent: per node (and "" for the session), the admission times of
	// the last firings, oldest first, for windowed caps only.
	recent map[string][]time.Time
}

// iterCheck is the verdict of a firing cap: ok, a stop (until is zero), or
// a wait until the window lets the next firing in.
type iterCheck struct {
	ok     bool
	until  time.Time
	reason string
	fields map[string]string
}

// check says whether node may fire now under its cap and the session's.
func (it *iterations) check(node string, nodeCap, graphCap graph.Limit, now time.Time) iterCheck {
	if nodeCap.N > 0 {
		if nodeCap.Window > 0 {
			if until, full := it.windowFull(node, nodeCap, now); full {
				return iterCheck{until: until, reason: fmt.Sprintf("node %s fired %d times in the last %s (max_iterations %s): it waits until %s",
					node, nodeCap.N, graph.FormatDuration(nodeCap.Window), nodeCap, until.UTC().Format(time.RFC3339)),
					fields: map[string]string{"limit": nodeCap.String(), "scope": "node", "until": until.UTC().Format(time.RFC3339)}}
			}
		} else if it.node[node] >= nodeCap.N {
			return iterCheck{reason: fmt.Sprintf("node %s reached its limit of %d firings (max_iterations / max_visits)", node, nodeCap.N),
				fields: map[string]string{"limit": itoa(nodeCap.N), "scope": "node"}}
		}
	}
	if graphCap.N > 0 {
		if graphCap.Window > 0 {
			if until, full := it.windowFull("", graphCap, now); full {
				return iterCheck{until: until, reason: fmt.Sprintf("the session made %d node firings in the last %s (graph max_iterations %s): %s waits until %s",
					graphCap.N, graph.FormatDuration(graphCap.Window), graphCap, node, until.UTC().Format(time.RFC3339)),
					fields: map[string]string{"limit": graphCap.String(), "scope": "graph", "until": until.UTC().Format(time.RFC3339)}}
			}
		} else if it.total >= graphCap.N {
			return iterCheck{reason: fmt.Sprintf("the session reached its limit of %d node firings (graph max_iterations)", graphCap.N),
				fields: map[string]string{"limit": itoa(graphCap.N), "scope": "graph"}}
		}
	}
	return iterCheck{ok: true}
}

// windowFull forgets the firings of scope older than the window and
// reports whether N remain, and when the oldest of them leaves.
func (it *iterations) windowFull(scope string, l graph.Limit, now time.Time) (time.Time, bool) {
	r := it.recent[scope]
	i := 0
	for i < len(r) && !r[i].Add(l.Window).After(now) {
		i++
	}
	if i > 0 {
		r = append(r[:0], r[i:]...)
		it.recent[scope] = r
	}
	if len(r) < l.N {
		return time.Time{}, false
	}
	return r[len(r)-l.N].Add(l.Window), true
}

// count records one admitted firing of node at now.
func (it *iterations) count(node string, nodeCap, graphCap graph.Limit, now time.Time) {
	it.node[node]++
	it.total++
	if nodeCap.Window > 0 {
		it.remember(node, nodeCap.N, now)
	}
	if graphCap.Window > 0 {
		it.remember("", graphCap.N, now)
	}
}

// remember keeps at most n times of scope.
func (it *iterations) remember(scope string, n int, now time.Time) {
	r := append(it.recent[scope], now)
	if len(r) > n {
		r = append(r[:0], r[len(r)-n:]...)
	}
	it.recent[scope] = r
}
