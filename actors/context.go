package actors

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"unsafe"

	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// A token's run context travels as deltas. An envelope a firing produces
// carries only the keys the firing set (Envelope.context) over the context
// of the envelope the firing consumed (Envelope.context_base), and the
// lineage's version (Envelope.context_version: its base's plus one). The
// whole context stays in process: the firing leaves its context map in the
// System's context store under the id of each envelope it sends, and the
// node that receives the envelope takes the map from there — it becomes
// that firing's own, so a hop costs what the firing changed, not the size
// of the context. Where the map is not in process (after a resume or a
// takeover: the envelope was sent by the process before) the receiver asks
// Config.Contexts, the journal, which holds the whole context of every
// envelope published and not yet consumed. A base found nowhere, or found
// at another version, refuses the envelope (ErrContext): never a silent
// empty context. Envelopes that carry their whole context (context_base
// empty): outside ones (their base and version are cleared on ingestion),
// a session's input, a fan-in's outputs (its context is rebuilt from the
// fork's), a loop_restart's.

// ErrContext is why an envelope whose run context cannot be resolved is
// refused: its base is neither in process nor in the journal, or is at
// another version than the envelope says.
var ErrContext = errors.New("actors: run context not resolvable")

// ContextSource returns the whole run context of an envelope the journal
// holds as published and not yet consumed, and the context's version; ok
// is false when it holds none. The map is the caller's.
type ContextSource func(envID string) (ctx map[string]string, version uint64, ok bool)

// maxHeldContexts bounds the context store. An entry lives from its
// envelope's publication until its receiver fires with it (or drops it:
// superseded, refused, removed by an edit), so the store holds about what
// the envelopes waiting in the nodes' buffers held when each carried its
// whole context. Past the bound nothing is evicted (an envelope whose base
// is gone would be refused where no journal holds it): the envelopes sent
// meanwhile carry their whole context instead, as outside ones do.
var maxHeldContexts = 1 << 20

// ctxEntry is the context an envelope carries, held for its receiver.
type ctxEntry struct {
	m       map[string]string
	owned   bool // the receiver takes m as its own; else m is shared: it copies it
	version uint64
}

// ctxStore holds, by envelope id, the whole context of the envelopes the
// session's firings sent and no node took yet. Its lock is a leaf.
type ctxStore struct {
	mu   sync.Mutex
	m    map[string]ctxEntry
	full uint64 // puts refused at the bound
}

// put holds e for envelope id. At the bound it holds nothing and returns
// how many puts it refused so far (0 when it held e).
func (s *ctxStore) put(id string, e ctxEntry) (refused uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]ctxEntry{}
	}
	if _, ok := s.m[id]; !ok && len(s.m) >= maxHeldContexts {
		s.full++
		return s.full
	}
	s.m[id] = e
	return 0
}

// take removes and returns the context held for envelope id.
func (s *ctxStore) take(id string) (ctxEntry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[id]
	if ok {
		delete(s.m, id)
	}
	return e, ok
}

// drop forgets the contexts of envelopes consumed without firing with them.
func (s *ctxStore) drop(envs []*pb.Envelope) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range envs {
		delete(s.m, e.GetId())
	}
}

// len is the number of contexts held.
func (s *ctxStore) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// tokenContext is the resolved run context a firing starts from.
type tokenContext struct {
	m map[string]string // the firing's own
	// base is the envelope m is the context of, which the firing's outputs
	// name as their base; "" when they carry the whole context.
	base    string
	version uint64
}

// resolveContext gives the whole run context env carries, as a map the
// caller owns.
func (s *System) resolveContext(env *pb.Envelope) (tokenContext, error) {
	v := env.GetContextVersion()
	if env.GetContextBase() == "" {
		kvs := env.GetContext()
		m := make(map[string]string, len(kvs)+s.contextRoom())
		for _, kv := range kvs {
			m[kv.GetKey()] = kv.GetValue()
		}
		tc := tokenContext{m: m, version: v}
		if v > 0 {
			// The runtime's own (outside envelopes have no version): the
			// journal recorded it, so the outputs may name it.
			tc.base = env.GetId()
		}
		return tc, nil
	}
	var m map[string]string
	e, ok := s.ctxs.take(env.GetId())
	switch {
	case ok && e.version != v:
		return tokenContext{}, fmt.Errorf("%w: envelope %s says version %d of its context, the process holds %d", ErrContext, env.GetId(), v, e.version)
	case ok && e.owned:
		m = e.m
	case ok:
		m = make(map[string]string, len(e.m)+8)
		maps.Copy(m, e.m)
	case s.cfg.Contexts != nil:
		var jv uint64
		if m, jv, ok = s.cfg.Contexts(env.GetId()); ok && jv != v {
			return tokenContext{}, fmt.Errorf("%w: envelope %s says version %d of its context, the journal holds %d", ErrContext, env.GetId(), v, jv)
		}
		if !ok {
			// The journal may not know the envelope (a sparse checkpoint
			// policy lost its producer's record in a crash) but know its
			// base, the envelope its producer consumed: the delta is over
			// that.
			if m, jv, ok = s.cfg.Contexts(env.GetContextBase()); ok && jv+1 != v {
				return tokenContext{}, fmt.Errorf("%w: envelope %s says version %d of its context, over %s at version %d in the journal",
					ErrContext, env.GetId(), v, env.GetContextBase(), jv)
			}
		}
	}
	if !ok {
		return tokenContext{}, fmt.Errorf("%w: envelope %s is a delta over %s (version %d), which is neither in this process nor in the journal",
			ErrContext, env.GetId(), env.GetContextBase(), v)
	}
	// The envelope's own keys again (what the held map has already, and
	// what was added to it on the way: a join's missing inputs).
	for _, kv := range env.GetContext() {
		m[kv.GetKey()] = kv.GetValue()
	}
	return tokenContext{m: m, base: env.GetId(), version: v}, nil
}

// maxContextRoom bounds contextRoom.
const maxContextRoom = 4096

// contextRoom is the room a whole context (a pipeline's input's) is made
// with for the keys its token will gather: a pipeline's firing sets
// internal.outcome.<node> and internal.retry_count.<node>, so its context
// grows by two keys a node visited. A map made for them is not grown
// (rehashed) again and again on the way (a run's map is handed down its
// chain, changed in place). A session's tokens are short: none.
func (s *System) contextRoom() int {
	t := s.topo.Load()
	if t == nil || t.session {
		return 8
	}
	return min(2*len(t.g.Nodes)+8, maxContextRoom)
}

// deltaOf lists the keys of ctx named in changed (and extra), sorted,
// once each: what an envelope carries over its base.
func deltaOf(ctx map[string]string, changed []string, extra ...string) []*pb.KV {
	var room [16]string // the keys, sorted: on the stack when they fit
	keys := append(append(room[:0], changed...), extra...)
	slices.Sort(keys)
	out := make([]*pb.KV, 0, len(keys))
	block := make([]pb.KV, len(keys)) // one allocation for every pair
	for i, k := range keys {
		if i > 0 && k == keys[i-1] {
			continue
		}
		kv := &block[len(out)]
		kv.Key, kv.Value = k, ctx[k]
		out = append(out, kv)
	}
	return out
}

// hopContext is what an envelope of the firing carries of ctx: the keys
// the firing set over its input's context (with extra, a fork branch's),
// or the whole of ctx when whole is set or the input's context cannot be
// named as a base.
func (j *job) hopContext(ctx map[string]string, whole bool, extra ...string) (kvs []*pb.KV, base string, version uint64) {
	if whole || j.tc.base == "" {
		return kvList(ctx), "", 1
	}
	if len(extra) == 0 {
		if j.delta == nil {
			j.delta = deltaOf(ctx, j.changed)
		}
		return j.delta, j.tc.base, j.tc.version + 1
	}
	return deltaOf(ctx, j.changed, extra...), j.tc.base, j.tc.version + 1
}

// wholeContext is the whole context ctx as a commit of node carries it
// (sorted pairs), the list of the node's last such commit when ctx has
// the same pairs: a node fed from outside (no base) mostly commits the
// same context at every firing — its own keys over an input that carries
// none — and a list made for each was two allocations and a sort per
// event of a durable ingest. The list is shared, read-only, by the
// commits and the journal (which keeps the last one). Only small contexts
// are kept, for up to maxWholeNodes nodes (then the table starts again):
// a pipeline's grows with the nodes it visits.
func (s *System) wholeContext(node string, ctx map[string]string) []*pb.KV {
	if v, ok := s.lastWhole.Load(node); ok {
		if kvs := v.([]*pb.KV); sameContext(ctx, kvs) {
			return kvs
		}
	}
	kvs := kvList(ctx)
	if len(kvs) <= maxWholePairs {
		if _, had := s.lastWhole.Swap(node, kvs); !had && s.wholeKept.Add(1) > maxWholeNodes {
			s.lastWhole.Clear()
			s.wholeKept.Store(0)
		}
	}
	return kvs
}

// Bounds of the whole contexts kept (wholeContext): the pairs of one, and
// the nodes.
const (
	maxWholePairs = 16
	maxWholeNodes = 1024
)

// sameContext reports whether ctx holds exactly the pairs of kvs.
func sameContext(ctx map[string]string, kvs []*pb.KV) bool {
	if len(ctx) != len(kvs) {
		return false
	}
	for _, kv := range kvs {
		if v, ok := ctx[kv.Key]; !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// holdContexts leaves the context of each envelope the firing sends in the
// store for its receiver. The first envelope of a map gets the map itself;
// the others of the same map share one copy (each receiver copies it),
// since the first receiver changes its own. An envelope the full store
// cannot hold for carries its whole context (it is not sent yet).
func (a *nodeActor) holdContexts(hops []hop) {
	var held []unsafe.Pointer                       // the maps given away
	var shared map[unsafe.Pointer]map[string]string // their shared copies
	for _, h := range hops {
		if h.ctx == nil || h.env.GetContextBase() == "" {
			continue // it carries its whole context
		}
		p := reflect.ValueOf(h.ctx).UnsafePointer()
		m, owned := h.ctx, true
		if slices.Contains(held, p) {
			if shared == nil {
				shared = map[unsafe.Pointer]map[string]string{}
			}
			c, ok := shared[p]
			if !ok {
				c = maps.Clone(h.ctx)
				shared[p] = c
			}
			m, owned = c, false
		}
		if n := a.s.ctxs.put(h.env.GetId(), ctxEntry{m: m, owned: owned, version: h.env.GetContextVersion()}); n > 0 {
			h.env.Context, h.env.ContextBase = kvList(m), ""
			if n == 1 || n%1024 == 0 {
				a.s.log.Warn("actors: the run-context store is full (envelopes not taken by any node pile up): envelopes carry their whole context",
					"node", a.node.ID, "times", n, "held", maxHeldContexts)
			}
			continue
		}
		if owned {
			held = append(held, p)
		}
	}
}

// SetContextStoreBound sets the context store's bound (tests: a full store
// with a few envelopes) and returns what restores it.
func SetContextStoreBound(n int) (restore func()) {
	old := maxHeldContexts
	maxHeldContexts = n
	return func() { maxHeldContexts = old }
}
