package session

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/graph"
)

// Placement spreads the sessions of a deployment (processes on one NATS
// server or cluster, one store) over its members.
//
// A member is a process that runs sessions it did not start: `serve
// --takeover` or `serve --place`. It Joins the member bucket
// (broker.MemberBucket) with its labels, which sessions it may run (every
// one, or those of its files) and its load (how many sessions it runs),
// and renews the entry every third of its TTL. A member is live until its
// entry expires, or at once no longer when it names a process of this host
// that is gone (as a lease does).
//
// Every member scans the store and computes the same plan from what it
// reads: Place gives each session that nobody owns to the least-loaded live
// member that may run it and whose labels match the session's placement
// (ties by member id), counting what the plan has given so far, so N
// sessions spread over M members. A member resumes only the sessions the
// plan gives it; the session's lease still decides, so two members that
// read different plans cannot both run a session — one's claim is refused
// (HeldError). A session the plan gives to another member that does not
// take it (a member whose entry outlived it) is taken by a matching member
// after a few scans. A session no live member matches waits, and says so
// (serve lists it as waiting, with the reason).
//
// Place spreads only the sessions nobody runs; a member that runs more
// than its share hands the surplus over to members that joined later
// (Rebalance, rebalance.go).

// DefaultMemberTTL is how long a member's entry lasts without renewal.
const DefaultMemberTTL = DefaultLeaseTTL

// PlacementAttr is the graph attribute naming the labels a session needs:
// placement="gpu=true,zone=eu" runs only on members with both labels.
const PlacementAttr = "placement"

// Member is a process of the deployment that runs sessions.
type Member struct {
	ID     string            `json:"id"`
	Host   string            `json:"host"`
	PID    int               `json:"pid"`
	Labels map[string]string `json:"labels,omitempty"`
	// Load is how many sessions it runs.
	Load int `json:"load"`
	// All: it may run any session; else only those of Files (absolute
	// paths of graph files).
	All     bool      `json:"all,omitempty"`
	Files   []string  `json:"files,omitempty"`
	Expires time.Time `json:"expires"`
}

// alive reports whether m is a live member at now.
func (m Member) alive(now time.Time) bool {
	if !now.Before(m.Expires) {
		return false
	}
	if m.Host == hostName && m.PID != os.Getpid() {
		return processAlive(m.PID)
	}
	return true
}

// Wanted is a session that needs a runner.
type Wanted struct {
	ID   string
	File string
	// Labels the runner must have (the graph's placement attribute).
	Labels map[string]string
}

// May reports whether m may run w: its files (or all) and its labels.
func (m Member) May(w Wanted) bool {
	if !m.All && !slices.Contains(m.Files, w.File) {
		return false
	}
	for k, v := range w.Labels {
		if got, ok := m.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Place is the plan: each wanted session's member id, "" for a session no
// member may run. Sessions are taken in id order, each given to the
// member that may run it with the least load (its Load plus what the plan
// gave it so far), ties to the smaller id. Every member that reads the same
// sessions and members computes the same plan.
func Place(wanted []Wanted, members []Member) map[string]string {
	ms := slices.Clone(members)
	sort.Slice(ms, func(i, k int) bool { return ms[i].ID < ms[k].ID })
	ws := slices.Clone(wanted)
	sort.Slice(ws, func(i, k int) bool { return ws[i].ID < ws[k].ID })
	load := make([]int, len(ms))
	for i, m := range ms {
		load[i] = m.Load
	}
	plan := make(map[string]string, len(ws))
	for _, w := range ws {
		best := -1
		for i, m := range ms {
			if m.May(w) && (best < 0 || load[i] < load[best]) {
				best = i
			}
		}
		if best < 0 {
			plan[w.ID] = ""
			continue
		}
		plan[w.ID] = ms[best].ID
		load[best]++
	}
	return plan
}

// ParseLabels reads "k=v,k2=v2" (keys and values of letters, digits, '_',
// '-' and '.'); "" is no labels.
func ParseLabels(s string) (map[string]string, error) {
	out := map[string]string{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || !labelToken(k) || !labelToken(v) {
			return nil, fmt.Errorf("label %q: want key=value (letters, digits, '_', '-', '.')", part)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("label %q given twice", k)
		}
		out[k] = v
	}
	return out, nil
}

func labelToken(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c == '_' || c == '-' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// FormatLabels is labels as ParseLabels reads them, keys sorted.
func FormatLabels(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = k + "=" + labels[k]
	}
	return strings.Join(keys, ",")
}

// PlacementOf is the labels g's sessions need (its placement attribute).
func PlacementOf(g *graph.Graph) (map[string]string, error) {
	return ParseLabels(g.Attrs.String(PlacementAttr))
}

// Membership is this process's entry in the member bucket, renewed until
// Leave.
type Membership struct {
	kv  jetstream.KeyValue
	clk clock.Clock
	ttl time.Duration

	mu   sync.Mutex
	self Member

	stop, done chan struct{}
	once       sync.Once
}

// Join enters self in the deployment's member bucket (its ID, Host and PID
// are filled in when empty) and renews the entry every third of ttl
// (DefaultMemberTTL when zero) until Leave.
func Join(ctx context.Context, b *broker.Broker, self Member, clk clock.Clock, ttl time.Duration, replicas int) (*Membership, error) {
	if clk == nil {
		clk = clock.Real()
	}
	if ttl <= 0 {
		ttl = DefaultMemberTTL
	}
	var kv jetstream.KeyValue
	err := broker.Retry(ctx, 10*time.Second, func(ctx context.Context) error { // a cluster electing leaders
		var err error
		kv, err = broker.Members(ctx, b.JetStream(), b.Storage(), broker.Replicas(replicas))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("session: members: %w", err)
	}
	if self.Host == "" {
		self.Host = hostName
	}
	if self.PID == 0 {
		self.PID = os.Getpid()
	}
	if self.ID == "" {
		self.ID = fmt.Sprintf("%s-%d-%s", memberToken(self.Host), self.PID, newToken()[:6])
	}
	m := &Membership{kv: kv, clk: clk, ttl: ttl, self: self, stop: make(chan struct{}), done: make(chan struct{})}
	// Retried: a bucket just made on a cluster may not answer while its
	// leader is elected.
	if err := broker.Retry(ctx, 5*time.Second, m.put); err != nil {
		return nil, err
	}
	go m.renew() // owned by m: Leave stops it
	return m, nil
}

// memberToken makes a host name a KV key token.
func memberToken(host string) string {
	b := []byte(host)
	for i, c := range b {
		if !(c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			b[i] = '_'
		}
	}
	return string(b)
}

// ID is this member's id.
func (m *Membership) ID() string { return m.self.ID }

// Self is this member's entry as it was last written.
func (m *Membership) Self() Member {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.self
}

func (m *Membership) put(ctx context.Context) error {
	m.mu.Lock()
	m.self.Expires = m.clk.Now().Add(m.ttl).UTC()
	data, _ := json.Marshal(m.self)
	m.mu.Unlock()
	if _, err := m.kv.Put(ctx, m.self.ID, data); err != nil {
		return fmt.Errorf("session: member %s: %w", m.self.ID, err)
	}
	return nil
}

func (m *Membership) renew() {
	defer close(m.done)
	t := time.NewTicker(m.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = m.put(ctx) // a server away: tried again at the next tick
		cancel()
	}
}

// SetLoad records how many sessions this member runs, at once when it
// changed.
func (m *Membership) SetLoad(ctx context.Context, n int) {
	m.mu.Lock()
	same := m.self.Load == n
	m.self.Load = n
	m.mu.Unlock()
	if !same {
		_ = m.put(ctx)
	}
}

// Members lists the live members, this one included (with its own view of
// its load), by id.
func (m *Membership) Members(ctx context.Context) ([]Member, error) {
	w, err := m.kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, err
	}
	defer func() { _ = w.Stop() }()
	now := m.clk.Now()
	self := m.Self()
	out := []Member{self}
	for {
		var e jetstream.KeyValueEntry
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case e = <-w.Updates():
		}
		if e == nil {
			break // the current entries are all read
		}
		var o Member
		if e.Key() == self.ID || json.Unmarshal(e.Value(), &o) != nil || o.ID != e.Key() || !o.alive(now) {
			continue
		}
		out = append(out, o)
	}
	sort.Slice(out, func(i, k int) bool { return out[i].ID < out[k].ID })
	return out, nil
}

// Leave stops the renewal and removes this member's entry. Idempotent.
func (m *Membership) Leave() {
	m.once.Do(func() {
		close(m.stop)
		<-m.done
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = m.kv.Delete(ctx, m.self.ID)
	})
}
