package edges

import "sync"

// QueueBuffer keeps every item in order: a ring whose capacity doubles when
// full, so that Push and Pop do not allocate once it has grown to the
// edge's backlog. The ring is made by the first Push: an edge that nothing
// crosses (most of a large idle session's) costs only the struct.
type QueueBuffer[T any] struct {
	mu      sync.Mutex
	ring    []T // len is a power of two (or 0 before the first Push)
	head    int // index of the oldest item
	n       int // items held
	closed  bool
	refused uint64
}

var _ Buffer[int] = (*QueueBuffer[int])(nil)

const minRing = 8

// NewQueue returns an empty queue buffer.
func NewQueue[T any]() *QueueBuffer[T] { return &QueueBuffer[T]{} }

// Push appends v.
func (q *QueueBuffer[T]) Push(v T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		q.refused++
		return
	}
	q.push(v)
}

func (q *QueueBuffer[T]) push(v T) {
	if q.n == len(q.ring) {
		grown := make([]T, max(minRing, 2*len(q.ring)))
		q.copyTo(grown)
		q.ring, q.head = grown, 0
	}
	q.ring[(q.head+q.n)&(len(q.ring)-1)] = v
	q.n++
}

// copyTo copies the held items, oldest first, to the front of dst.
func (q *QueueBuffer[T]) copyTo(dst []T) {
	k := copy(dst, q.ring[q.head:min(q.head+q.n, len(q.ring))])
	copy(dst[k:], q.ring[:q.n-k])
}

// Pop takes the oldest item.
func (q *QueueBuffer[T]) Pop() (T, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var zero T
	if q.n == 0 {
		return zero, false
	}
	v := q.ring[q.head]
	q.ring[q.head] = zero // let the item be collected
	q.head = (q.head + 1) & (len(q.ring) - 1)
	q.n--
	return v, true
}

// Len is the number of items held; all are ready.
func (q *QueueBuffer[T]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}

// Dropped counts only items refused after Close: a queue discards nothing.
func (q *QueueBuffer[T]) Dropped() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.refused
}

// Pending returns the items in order.
func (q *QueueBuffer[T]) Pending() []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n == 0 {
		return nil
	}
	out := make([]T, q.n)
	q.copyTo(out)
	return out
}

// Restore replaces the held items with items, in order.
func (q *QueueBuffer[T]) Restore(items []T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		q.refused += uint64(len(items))
		return
	}
	q.refused += uint64(q.n)
	clear(q.ring)
	q.head, q.n = 0, 0
	for _, v := range items {
		q.push(v)
	}
}

// Close refuses further items.
func (q *QueueBuffer[T]) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
}
