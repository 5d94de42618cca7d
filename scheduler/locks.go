package scheduler

import (
	"sort"
	"strings"
)

// lockTable holds advisory path locks (node attribute locks="a,b/").
//
// Two paths conflict when one is the other or a prefix of it at a path
// boundary: "src/" conflicts with "src/a.go", and "src" with "src/a.go";
// "src/a" does not conflict with "src/ab". A node takes its whole lock set
// or nothing, so it never holds some locks while waiting for others (no
// deadlock between nodes). Waiters are served in arrival order: a node may
// not take a set that conflicts with the set of a node that waited before
// it, so a node with a wide set is not starved by narrow ones.
type lockTable struct {
	held    map[string]string // path -> holder
	waiters []lockWaiter      // in arrival order
}

type lockWaiter struct {
	node  string
	paths []string
}

// LockHold is one held lock.
type LockHold struct {
	Path string
	Node string
}

// conflicts reports whether two lock paths overlap.
func conflicts(a, b string) bool {
	a, b = strings.TrimSuffix(a, "/"), strings.TrimSuffix(b, "/")
	if a == b {
		return true
	}
	if len(a) > len(b) {
		a, b = b, a
	}
	return a == "" || strings.HasPrefix(b, a+"/")
}

func anyConflict(as, bs []string) (a string, ok bool) {
	for _, x := range as {
		for _, y := range bs {
			if conflicts(x, y) {
				return x, true
			}
		}
	}
	return "", false
}

// blocker names the holder of a lock conflicting with paths, and its path.
// Paths are visited in sorted order so that the answer is stable.
func (l *lockTable) blocker(node string, paths []string) (holder, path string) {
	if len(l.held) == 0 {
		return "", ""
	}
	held := make([]string, 0, len(l.held))
	for p := range l.held {
		held = append(held, p)
	}
	sort.Strings(held)
	for _, p := range held {
		if h := l.held[p]; h != node {
			if _, ok := anyConflict([]string{p}, paths); ok {
				return h, p
			}
		}
	}
	return "", ""
}

func (l *lockTable) position(node string) int {
	for i, w := range l.waiters {
		if w.node == node {
			return i
		}
	}
	return -1
}

// tryAcquire takes all of node's locks or none. When it cannot, it says
// who is in the way: the holder of a conflicting lock, or (queued) an
// earlier waiter wanting a conflicting path.
func (l *lockTable) tryAcquire(node string, paths []string) (ok bool, holder, path string, queued bool) {
	if len(paths) == 0 {
		return true, "", "", false
	}
	if h, p := l.blocker(node, paths); h != "" {
		l.wait(node, paths)
		return false, h, p, false
	}
	ahead := l.position(node)
	if ahead < 0 {
		ahead = len(l.waiters)
	}
	for _, w := range l.waiters[:ahead] {
		if p, ok := anyConflict(w.paths, paths); ok {
			l.wait(node, paths)
			return false, w.node, p, true
		}
	}
	for _, p := range paths {
		l.held[p] = node
	}
	l.remove(node)
	return true, "", "", false
}

func (l *lockTable) wait(node string, paths []string) {
	if l.position(node) < 0 {
		l.waiters = append(l.waiters, lockWaiter{node: node, paths: paths})
	}
}

// remove drops node from the queue.
func (l *lockTable) remove(node string) {
	if i := l.position(node); i >= 0 {
		l.waiters = append(l.waiters[:i], l.waiters[i+1:]...)
	}
}

// release frees node's locks and returns the waiters to wake (all of them:
// each tries again, and the order above decides).
func (l *lockTable) release(node string) []string {
	for p, h := range l.held {
		if h == node {
			delete(l.held, p)
		}
	}
	return l.waiting()
}

func (l *lockTable) waiting() []string {
	out := make([]string, len(l.waiters))
	for i, w := range l.waiters {
		out[i] = w.node
	}
	return out
}

// heldBy reports whether node holds a lock.
func (l *lockTable) heldBy(node string) bool {
	for _, h := range l.held {
		if h == node {
			return true
		}
	}
	return false
}

// holds lists the held locks by path.
func (l *lockTable) holds() []LockHold {
	out := make([]LockHold, 0, len(l.held))
	for p, n := range l.held {
		out = append(out, LockHold{Path: p, Node: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}
