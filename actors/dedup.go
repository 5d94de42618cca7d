package actors

import "sync"

// dedupWindow remembers the ids of the last envelopes a session accepted,
// so that a repeated publish (an outside client retrying with the same
// Nats-Msg-Id, a replay after a crash) reaches its node once. It is safe
// for concurrent use by the subscription callbacks.
type dedupWindow struct {
	mu   sync.Mutex
	seen map[string]struct{}
	ring []string
	next int
}

func newDedupWindow(size int) *dedupWindow {
	return &dedupWindow{seen: make(map[string]struct{}, size), ring: make([]string, size)}
}

// first records id and reports whether it was not seen in the window.
func (d *dedupWindow) first(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, dup := d.seen[id]; dup {
		return false
	}
	if old := d.ring[d.next]; old != "" {
		delete(d.seen, old)
	}
	d.ring[d.next] = id
	d.next = (d.next + 1) % len(d.ring)
	d.seen[id] = struct{}{}
	return true
}

// has reports whether id is in the window.
func (d *dedupWindow) has(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.seen[id]
	return ok
}

// add records id (no-op when present).
func (d *dedupWindow) add(id string) { d.first(id) }
