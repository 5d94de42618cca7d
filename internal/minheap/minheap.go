// Package minheap is container/heap for a slice of values, without its
// interface: container/heap's Push and Pop take and return an any, which
// boxes every value pushed or popped (an allocation for each above 255 or
// of more than a word: a sequence, a consumed envelope's record), and the
// durable path pushes and pops one per envelope.
package minheap

// Push adds x to the heap h, ordered by less.
func Push[T any](h *[]T, x T, less func(a, b T) bool) {
	*h = append(*h, x)
	up(*h, len(*h)-1, less)
}

// Pop removes the least element of h (which is not empty) and returns it.
func Pop[T any](h *[]T, less func(a, b T) bool) T {
	s := *h
	n := len(s) - 1
	s[0], s[n] = s[n], s[0]
	down(s[:n], 0, less)
	x := s[n]
	var zero T
	s[n] = zero // no reference kept past the heap's length
	*h = s[:n]
	return x
}

// Init orders h as a heap.
func Init[T any](h []T, less func(a, b T) bool) {
	for i := len(h)/2 - 1; i >= 0; i-- {
		down(h, i, less)
	}
}

func up[T any](h []T, j int, less func(a, b T) bool) {
	for j > 0 {
		i := (j - 1) / 2 // parent
		if !less(h[j], h[i]) {
			return
		}
		h[i], h[j] = h[j], h[i]
		j = i
	}
}

func down[T any](h []T, i int, less func(a, b T) bool) {
	n := len(h)
	for {
		j := 2*i + 1
		if j >= n || j < 0 {
			return
		}
		if r := j + 1; r < n && less(h[r], h[j]) {
			j = r
		}
		if !less(h[j], h[i]) {
			return
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
}
