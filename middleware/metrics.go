package middleware

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/switchyard/switchyard/nodes"
)

// NodeStats are the counters Metrics keeps for one node.
type NodeStats struct {
	Node     string
	Runs     int64 // handler runs (every attempt counts)
	Failures int64 // runs that failed or returned an error
	Duration time.Duration
	Max      time.Duration // the longest run
	Usage    nodes.Usage
}

// Metrics counts handler runs per node: runs, failures, time and usage. It
// is safe for concurrent use; one Metrics may serve several sessions.
type Metrics struct {
	cfg   config
	mu    sync.Mutex
	stats map[string]*NodeStats
}

// NewMetrics returns empty metrics.
func NewMetrics(opts ...Option) *Metrics {
	return &Metrics{cfg: configure(opts), stats: map[string]*NodeStats{}}
}

// Middleware returns the middleware that records into m.
func (m *Metrics) Middleware() nodes.Middleware {
	return func(next nodes.Handler) nodes.Handler {
		return nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
			start := m.cfg.clk.Now()
			o, err := next.Handle(ctx, in)
			m.record(nodeID(in), m.cfg.clk.Now().Sub(start), o, err)
			return o, err
		})
	}
}

func (m *Metrics) record(node string, d time.Duration, o *nodes.Outcome, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.stats[node]
	if s == nil {
		s = &NodeStats{Node: node}
		m.stats[node] = s
	}
	s.Runs++
	s.Duration += d
	s.Max = max(s.Max, d)
	if err != nil || o == nil || o.Status == nodes.StatusFail {
		s.Failures++
	}
	if o != nil {
		s.Usage = s.Usage.Add(o.Usage)
	}
}

// Node returns the counters of one node (zero when it never ran).
func (m *Metrics) Node(id string) NodeStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.stats[id]; s != nil {
		return *s
	}
	return NodeStats{Node: id}
}

// Snapshot returns every node's counters, by node id.
func (m *Metrics) Snapshot() []NodeStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]NodeStats, 0, len(m.stats))
	for _, s := range m.stats {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}
