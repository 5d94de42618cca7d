package actors

import "sync"

// dedupWindow remembers the ids of the last envelopes a session accepted,
// so that a repeated publish (an outside client retrying with the same
// Nats-Msg-Id, a replay after a crash) reaches its node once. It is safe
// for concurrent use by the subscription callbacks.
//
// It grows with use up to size ids: a session that sees few envelopes
// (most of them, and every CLI run) does not pay for a full window up front
// (two 65,536-id windows cost every session start 4 ms and 3 MB).
type dedupWindow struct {
	mu   sync.Mutex
	size int
	seen map[string]struct{}
	ring []string // the ids in arrival order, up to size; then a ring
	next int      // where the next id goes once the ring is full
}

func newDedupWindow(size int) *dedupWindow {
	return &dedupWindow{size: size, seen: map[string]struct{}{}}
}

// first records id and reports whether it was not seen in the window.
func (d *dedupWindow) first(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, dup := d.seen[id]; dup {
		return false
	}
	if len(d.ring) < d.size {
		d.ring = append(d.ring, id)
	} else {
		delete(d.seen, d.ring[d.next])
		d.ring[d.next] = id
		d.next = (d.next + 1) % d.size
	}
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
