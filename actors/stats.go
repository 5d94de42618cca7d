package actors

import (
	"context"
	"sort"
)

// BufferStat is one delivery buffer of a node, as metrics and the web view
// show it.
type BufferStat struct {
	Node string `json:"node"`
	// Edge is the edge id ("" is the node's inbox).
	Edge string `json:"edge"`
	// Ready is how many envelopes can be taken now; Held also counts
	// those a debounce window still holds.
	Ready int `json:"ready"`
	Held  int `json:"held"`
	// Dropped is how many envelopes the buffer's delivery mode discarded.
	Dropped uint64 `json:"dropped"`
}

// bufferQuery asks a node actor for its buffers' state; the actor answers
// on reply (buffered), from its own goroutine, which owns the buffers map.
type bufferQuery struct{ reply chan []BufferStat }

func (a *nodeActor) bufferStats() []BufferStat {
	out := make([]BufferStat, 0, len(a.bufs))
	for _, eb := range a.bufs {
		b := eb.b
		out = append(out, BufferStat{Node: a.node.ID, Edge: eb.id, Ready: b.Len(), Held: len(b.Pending()), Dropped: b.Dropped()})
	}
	return out
}

// Buffers returns every node's delivery buffers, by node then edge. A node
// that does not answer before ctx ends (stopping) is left out. It is
// meant for scrapes and views, not for the firing path.
func (s *System) Buffers(ctx context.Context) []BufferStat {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil
	}
	ids := make([]string, 0, len(s.actors))
	for id := range s.actors {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	sort.Strings(ids)
	queries := make([]*bufferQuery, len(ids))
	for i, id := range ids {
		queries[i] = &bufferQuery{reply: make(chan []BufferStat, 1)}
		s.wake(id, queries[i])
	}
	var out []BufferStat
	for _, q := range queries {
		select {
		case bs := <-q.reply:
			out = append(out, bs...)
		case <-ctx.Done():
			return out
		}
	}
	return out
}
