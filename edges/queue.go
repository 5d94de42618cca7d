package edges

import "sync"

// QueueBuffer keeps every item in order (a growable ring).
type QueueBuffer[T any] struct {
	mu   sync.Mutex
	ring []T
	head int
	n    int
}

var _ Buffer[int] = (*QueueBuffer[int])(nil)

// NewQueue returns an empty queue buffer.
func NewQueue[T any]() *QueueBuffer[T] { return &QueueBuffer[T]{ring: make([]T, 8)} }

// Push appends v.
func (q *QueueBuffer[T]) Push(v T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n == len(q.ring) {
		grown := make([]T, 2*len(q.ring))
		for i := 0; i < q.n; i++ {
			grown[i] = q.ring[(q.head+i)%len(q.ring)]
		}
		q.ring, q.head = grown, 0
	}
	q.ring[(q.head+q.n)%len(q.ring)] = v
	q.n++
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
	q.ring[q.head] = zero
	q.head = (q.head + 1) % len(q.ring)
	q.n--
	return v, true
}

// Len is the number of items held.
func (q *QueueBuffer[T]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}

// Dropped is always 0: a queue drops nothing.
func (q *QueueBuffer[T]) Dropped() uint64 { return 0 }

// Pending returns the items in order.
func (q *QueueBuffer[T]) Pending() []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]T, q.n)
	for i := range out {
		out[i] = q.ring[(q.head+i)%len(q.ring)]
	}
	return out
}

// Close does nothing.
func (q *QueueBuffer[T]) Close() {}
