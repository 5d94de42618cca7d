package session

import (
	"github.com/benbjohnson/immutable"
	"google.golang.org/protobuf/proto"

	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// The journal holds the whole run context of every envelope published and
// not consumed yet, and of the last firing; envelopes and commits carry
// only deltas (actors/context.go, docs/envelope.md). The contexts are
// persistent maps: a firing's context shares all but its changes with the
// one it came from, so a commit costs its changes, not the context's size.
// They are made whole only where a whole context is written or asked
// for: a snapshot (checkpoint.latest, checkpoint.json), a resumed
// receiver's question (contextOf).

// runCtx is one version of a token's run context.
type runCtx struct {
	m       *immutable.Map[string, string]
	version uint64
}

func emptyCtx() *immutable.Map[string, string] {
	return immutable.NewMap[string, string](nil)
}

// lastCtx is the context a firing committed, as its commit gives it: its
// pairs over the context it started from (over; nil: the pairs are the
// whole context); due while it is not made.
type lastCtx struct {
	over *immutable.Map[string, string]
	kvs  []*pb.KV
	due  bool
}

// curCtx is the run context after the last firing (j.mu held). A commit
// only notes it (apply): it is made when read — by a snapshot, or an
// output that carries it — not at every firing of a reactive node, whose
// next firing replaces it.
func (j *journal) curCtx() runCtx {
	if n := j.curNext; n.due {
		j.cur, j.curNext = runCtx{m: with(n.over, n.kvs)}, lastCtx{}
	}
	return j.cur
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
		j.ctxs[e.GetId()] = runCtx{m: with(nil, e.GetContext()), version: e.GetContextVersion()}
		return
	}
	if b != baseID || base == nil {
		bc, ok := j.ctxs[b]
		if !ok {
			return
		}
		base = &bc
	}
	j.ctxs[e.GetId()] = runCtx{m: with(base.m, e.GetContext()), version: e.GetContextVersion()}
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
	return whole(c.m), c.version, true
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
	w.Context = kvs(whole(c.m))
	return w
}

// sameKVs reports whether a and b are the same list (not equal contents).
func sameKVs(a, b []*pb.KV) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
