package actors

import (
	"hash/maphash"
	"sync"
)

// dedupWindow remembers the ids of the last envelopes a session accepted,
// so that a repeated publish (an outside client retrying with the same
// Nats-Msg-Id, a replay after a crash) reaches its node once. It is safe
// for concurrent use by the subscription callbacks.
//
// It grows with use up to size ids: a session that sees few envelopes
// (most of them, and every CLI run) does not pay for a full window up front
// (two 65,536-id windows cost every session start 4 ms and 3 MB).
//
// The ids are looked up by a 64-bit hash (seen: hash → place in ring), and
// a hit is confirmed against the id itself: a map keyed by the strings
// compared each probe's key in the heap and held 65,536 pointers the
// collector scanned at every cycle (a twentieth of the CPU of queue
// ingest). Two ids of the same hash (about one chance in 2^64 a pair)
// only make the older one forgettable early; an id is never taken for
// another.
type dedupWindow struct {
	mu   sync.Mutex
	size int
	seed maphash.Seed
	seen map[uint64]int32 // hash of an id -> its place in ring
	ring []seenID         // the ids in arrival order, up to size; then a ring
	next int              // where the next id goes once the ring is full
}

// seenID is an id in the window and its hash: the id that leaves a full
// ring is dropped from seen by the hash kept here, not hashed again (its
// bytes, long out of the cache, cost a miss more for every id taken).
type seenID struct {
	h  uint64
	id string
}

func newDedupWindow(size int) *dedupWindow {
	return &dedupWindow{size: size, seed: maphash.MakeSeed(), seen: map[uint64]int32{}}
}

// first records id and reports whether it was not seen in the window.
func (d *dedupWindow) first(id string) bool {
	h := maphash.String(d.seed, id)
	d.mu.Lock()
	defer d.mu.Unlock()
	if i, ok := d.seen[h]; ok && d.ring[i].id == id {
		return false
	}
	var at int
	if len(d.ring) < d.size {
		at = len(d.ring)
		d.ring = append(d.ring, seenID{h, id})
	} else {
		at = d.next
		old := d.ring[at].h
		if i, ok := d.seen[old]; ok && int(i) == at {
			delete(d.seen, old)
		}
		d.ring[at] = seenID{h, id}
		d.next = (d.next + 1) % d.size
	}
	d.seen[h] = int32(at)
	return true
}

// has reports whether id is in the window.
func (d *dedupWindow) has(id string) bool {
	h := maphash.String(d.seed, id)
	d.mu.Lock()
	defer d.mu.Unlock()
	i, ok := d.seen[h]
	return ok && d.ring[i].id == id
}

// add records id (no-op when present).
func (d *dedupWindow) add(id string) { d.first(id) }
