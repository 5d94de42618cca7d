package actors

import "github.com/switchyard/switchyard/internal/minheap"

// seqSet is the set of stream sequences a node holds unacknowledged, with
// its lowest member in amortised O(log n): a map for membership and a
// min-heap of sequences from which removed ones are dropped lazily, when
// they reach the top. The heap is rebuilt from the map when removed
// sequences make up most of it (a node holding one old envelope while it
// acknowledges a million newer ones keeps a heap of one, not a million),
// so each operation costs amortised O(log n) and memory stays O(held).
type seqSet struct {
	in map[uint64]struct{}
	h  seqHeap
}

func newSeqSet() seqSet { return seqSet{} }

// add holds seq. The set's map is made by the first add: most nodes of a
// large session hold nothing.
func (s *seqSet) add(seq uint64) {
	if _, ok := s.in[seq]; ok {
		return
	}
	if s.in == nil {
		s.in = map[uint64]struct{}{}
	}
	s.in[seq] = struct{}{}
	minheap.Push(&s.h, seq, seqLess)
}

// remove lets seq go.
func (s *seqSet) remove(seq uint64) {
	if _, ok := s.in[seq]; !ok {
		return
	}
	delete(s.in, seq)
	if len(s.h) > 2*len(s.in)+64 {
		s.h = s.h[:0]
		for q := range s.in {
			s.h = append(s.h, q)
		}
		minheap.Init(s.h, seqLess)
	}
}

// has reports whether seq is held.
func (s *seqSet) has(seq uint64) bool {
	_, ok := s.in[seq]
	return ok
}

// len is how many sequences are held.
func (s *seqSet) len() int { return len(s.in) }

// min is the lowest sequence held; ok is false when none is.
func (s *seqSet) min() (uint64, bool) {
	for len(s.h) > 0 {
		if _, ok := s.in[s.h[0]]; ok {
			return s.h[0], true
		}
		minheap.Pop(&s.h, seqLess)
	}
	return 0, false
}

type seqHeap = []uint64

func seqLess(a, b uint64) bool { return a < b }
