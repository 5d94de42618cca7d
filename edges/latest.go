package edges

import "sync"

// LatestBuffer keeps only the newest undelivered item.
type LatestBuffer[T any] struct {
	mu      sync.Mutex
	v       T
	has     bool
	dropped uint64
}

var _ Buffer[int] = (*LatestBuffer[int])(nil)

// NewLatest returns an empty latest buffer.
func NewLatest[T any]() *LatestBuffer[T] { return &LatestBuffer[T]{} }

// Push replaces the undelivered item, counting it dropped.
func (l *LatestBuffer[T]) Push(v T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.has {
		l.dropped++
	}
	l.v, l.has = v, true
}

// Pop takes the item.
func (l *LatestBuffer[T]) Pop() (T, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var zero T
	if !l.has {
		return zero, false
	}
	v := l.v
	l.v, l.has = zero, false
	return v, true
}

// Len is 0 or 1.
func (l *LatestBuffer[T]) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.has {
		return 1
	}
	return 0
}

// Dropped counts replaced items.
func (l *LatestBuffer[T]) Dropped() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dropped
}

// Pending returns the held item, if any.
func (l *LatestBuffer[T]) Pending() []T {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.has {
		return nil
	}
	return []T{l.v}
}

// Close does nothing.
func (l *LatestBuffer[T]) Close() {}
