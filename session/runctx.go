package session

import (
	"github.com/benbjohnson/immutable"
	"google.golang.org/protobuf/proto"

	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// The journal holds the whole run context of every envelope published and
// not consumed yet, and of the last firing; envelopes and commits carry
// only deltas (actors/context.go, docs/envelope.md). The journal keeps a
// context as its pairs over the one it came from (ctxVal) and makes it a
// persistent map — sharing all but its changes with the one it came from,
// so a commit costs its changes, not the context's size — only where a
// whole context is written or asked for: a snapshot (checkpoint.latest,
// checkpoint.json), a resumed receiver's question (contextOf).

// runCtx is one version of a token's run context.
type runCtx struct {
	c       *ctxVal
	version uint64
}

// m is the context, made if it was not.
func (r runCtx) m() *immutable.Map[string, string] { return r.c.get() }

func emptyCtx() *immutable.Map[string, string] {
	return immutable.NewMap[string, string](nil)
}

// ctxVal is a context as a commit or an envelope gives it: its pairs over
// the context it came from (base; nil: the pairs are the whole context),
// made into a map only when read. A durable pipeline's firing gives its
// output the context it committed, and nothing reads it unless a snapshot
// is written or a resumed receiver asks: a successful pipeline whose store
// goes at its end never made one (setting a firing's keys into the map was
// ~4% of a 10-node pipeline's CPU and its largest allocation). A chain of
// contexts not made is cut at maxLazyDepth, so that what it holds stays
// bounded.
type ctxVal struct {
	m     *immutable.Map[string, string] // once made
	made  bool
	base  *ctxVal
	kvs   []*pb.KV
	depth int // how many not made, this one included, down to a made one
}

// maxLazyDepth is the longest chain of contexts not made (ctxVal).
const maxLazyDepth = 64

// madeCtx is the context m, made.
func madeCtx(m *immutable.Map[string, string]) *ctxVal { return &ctxVal{m: m, made: true} }

// newCtx is the context of kvs set over base (nil: kvs are the whole
// context), not made yet.
func newCtx(base *ctxVal, kvs []*pb.KV) *ctxVal {
	c := &ctxVal{base: base, kvs: kvs, depth: 1}
	if base != nil && !base.made {
		c.depth = base.depth + 1
	}
	if c.depth > maxLazyDepth {
		c.get()
	}
	return c
}

// get is the context, made (and kept) with the ones below it that were
// not made yet. A nil ctxVal is no context.
func (c *ctxVal) get() *immutable.Map[string, string] {
	if c == nil {
		return nil
	}
	if c.made {
		return c.m
	}
	var room [8]*ctxVal
	chain := room[:0]
	for x := c; x != nil && !x.made; x = x.base {
		chain = append(chain, x)
	}
	var m *immutable.Map[string, string]
	if b := chain[len(chain)-1].base; b != nil {
		m = b.m
	}
	for i := len(chain) - 1; i >= 0; i-- {
		x := chain[i]
		m = with(m, x.kvs)
		x.m, x.made, x.base, x.kvs, x.depth = m, true, nil, nil, 0
	}
	return c.m
}

// with is m with the pairs of kvs set.
func with(m *immutable.Map[string, string], kvs []*pb.KV) *immutable.Map[string, string] {
	if m == nil {
		b := immutable.NewMapBuilder[string, string](nil) // a whole context: built in place
		for _, kv := range kvs {
			b.Set(kv.GetKey(), kv.GetValue())
		}
		return b.Map()
	}
	for _, kv := range kvs {
		if v, ok := m.Get(kv.GetKey()); !ok || v != kv.GetValue() {
			m = m.Set(kv.GetKey(), kv.GetValue())
		}
	}
	return m
}

// whole is m as a map the caller owns.
func whole(m *immutable.Map[string, string]) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	out := make(map[string]string, m.Len())
	for it := m.Iterator(); !it.Done(); {
		k, v, _ := it.Next()
		out[k] = v
	}
	return out
}

// trackContext records the whole context of an envelope the journal
// holds as pending: its own when it carries it whole, else its delta over
// its base's (the consumed envelope a commit started from, given as base
// when the commit has it). An envelope whose base the journal does not
// hold is not tracked: a resumed receiver then refuses it (actors.ErrContext).
func (j *journal) trackContext(e *pb.Envelope, baseID string, base *runCtx) {
	if !j.keepContext() {
		return
	}
	b := e.GetContextBase()
	if b == "" {
		j.ctxs[e.GetId()] = runCtx{c: newCtx(nil, e.GetContext()), version: e.GetContextVersion()}
		return
	}
	if b != baseID || base == nil {
		bc, ok := j.ctxs[b]
		if !ok {
			return
		}
		base = &bc
	}
	j.ctxs[e.GetId()] = runCtx{c: newCtx(base.c, e.GetContext()), version: e.GetContextVersion()}
}

// contextOf is actors.Config.Contexts: the whole context of a pending
// envelope.
func (j *journal) contextOf(id string) (map[string]string, uint64, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	c, ok := j.ctxs[id]
	if !ok {
		return nil, 0, false
	}
	return whole(c.m()), c.version, true
}

// wholeEnvelope is e as a snapshot keeps it: with its whole context
// (a delta's base may be gone when the snapshot is read).
func (j *journal) wholeEnvelope(e *pb.Envelope) *pb.Envelope {
	if e.GetContextBase() == "" {
		return e
	}
	c, ok := j.ctxs[e.GetId()]
	if !ok {
		return e // not resolvable: a resumed receiver refuses it
	}
	w := proto.CloneOf(e)
	w.ContextBase = ""
	w.Context = kvs(whole(c.m()))
	return w
}

// sameKVs reports whether a and b are the same list (not equal contents).
func sameKVs(a, b []*pb.KV) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
