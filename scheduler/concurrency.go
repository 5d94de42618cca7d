package scheduler

import "strings"

// inFlight caps the handlers running at once across the session; waiters
// are served in arrival order.
type inFlight struct {
	max     int
	running int
	waiters []string
}

func (f *inFlight) tryAcquire(node string) bool {
	if f.max <= 0 {
		f.running++
		return true
	}
	if f.running < f.max && (len(f.waiters) == 0 || f.waiters[0] == node) {
		if len(f.waiters) > 0 {
			f.waiters = f.waiters[1:]
		}
		f.running++
		return true
	}
	for _, w := range f.waiters {
		if w == node {
			return false
		}
	}
	f.waiters = append(f.waiters, node)
	return false
}

func (f *inFlight) release() (next string) {
	f.running--
	if len(f.waiters) > 0 {
		return f.waiters[0]
	}
	return ""
}

// lockTable holds advisory path locks. Two paths conflict when one is a
// prefix of the other at a path boundary: "src/" conflicts with
// "src/a.go", and "src" with "src/a.go"; "src/a" does not conflict with
// "src/ab".
type lockTable struct {
	held    map[string]string // path -> holder
	waiters []string          // nodes waiting, in arrival order
}

func conflicts(a, b string) bool {
	a, b = strings.TrimSuffix(a, "/"), strings.TrimSuffix(b, "/")
	if a == b {
		return true
	}
	if len(a) > len(b) {
		a, b = b, a
	}
	return strings.HasPrefix(b, a+"/")
}

// blocker returns who holds a lock conflicting with paths, and on which.
func (l *lockTable) blocker(node string, paths []string) (holder, path string) {
	for held, h := range l.held {
		if h == node {
			continue
		}
		for _, p := range paths {
			if conflicts(held, p) {
				return h, held
			}
		}
	}
	return "", ""
}

// tryAcquire takes all of node's locks or none.
func (l *lockTable) tryAcquire(node string, paths []string) (ok bool, holder, path string) {
	if len(paths) == 0 {
		return true, "", ""
	}
	if h, p := l.blocker(node, paths); h != "" {
		l.wait(node)
		return false, h, p
	}
	for _, p := range paths {
		l.held[p] = node
	}
	l.unwait(node)
	return true, "", ""
}

func (l *lockTable) wait(node string) {
	for _, w := range l.waiters {
		if w == node {
			return
		}
	}
	l.waiters = append(l.waiters, node)
}

func (l *lockTable) unwait(node string) {
	for i, w := range l.waiters {
		if w == node {
			l.waiters = append(l.waiters[:i], l.waiters[i+1:]...)
			return
		}
	}
}

// release frees node's locks and returns the waiters to wake.
func (l *lockTable) release(node string) []string {
	for p, h := range l.held {
		if h == node {
			delete(l.held, p)
		}
	}
	return append([]string(nil), l.waiters...)
}
