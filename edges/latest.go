package edges

import "sync"

// LatestBuffer keeps only the newest undelivered item: a Push replaces an
// item not yet popped, which is counted as dropped.
type LatestBuffer[T any] struct {
	mu      sync.Mutex
	v       T
	has     bool
	dropped uint64
	closed  bool
}

var _ Buffer[int] = (*LatestBuffer[int])(nil)

// NewLatest returns an empty latest buffer.
func NewLatest[T any]() *LatestBuffer[T] { return &LatestBuffer[T]{} }

// Push replaces the undelivered item, counting it dropped.
func (l *LatestBuffer[T]) Push(v T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		l.dropped++
		return
	}
	l.put(v)
}

func (l *LatestBuffer[T]) put(v T) {
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

// Dropped counts replaced and refused items.
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

// Restore replaces the held item with the last of items (the others are
// counted dropped, as if pushed in order).
func (l *LatestBuffer[T]) Restore(items []T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		l.dropped += uint64(len(items))
		return
	}
	for _, v := range items {
		l.put(v)
	}
}

// Close refuses further items.
func (l *LatestBuffer[T]) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
}
