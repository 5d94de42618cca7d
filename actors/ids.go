package actors

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"strconv"
	"sync"
)

// Envelope ids. An envelope's id is its JetStream de-duplication id
// (Nats-Msg-Id) and the id the session's dedup windows remember. The
// runtime's ids are deterministic — the same firing always produces the
// same ids, so a replay after a crash is recognised — and therefore
// predictable (<session>.<node>.<firing>.<target>). Anyone who may publish
// on an edge could then send an envelope with the id of a node's next
// output before it fires: the forged one would be consumed and the real
// one dropped as a duplicate, by the stream (Nats-Msg-Id) or by the node
// (the id in the body).
//
// So the runtime's ids carry a signature: base + "~" + 16 hex digits of
// HMAC-SHA256(key, base), with a per-session secret key that never leaves
// the runtime (a durable session keeps it in its KV bucket, which outside
// roles cannot read). They stay deterministic for the runtime and cannot
// be predicted from outside, even by someone who has seen earlier ids in
// events. Outside ids are left as they are: their own retries still
// de-duplicate, replies still name them (agent.reply in_reply_to), and no
// outside id can equal a future id of the runtime's.
//
// Re-minting outside ids on arrival cannot do this alone: the stream
// de-duplicates on Nats-Msg-Id before the runtime sees the message, and
// publish permissions cannot restrict headers. A separate ingest subject
// would change the documented subjects outside systems publish on.

// idTagLen is the number of hex digits of an id's signature (64 bits).
const idTagLen = 16

// NewIDKey returns a random key for Config.IDKey.
func NewIDKey() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}

// idSigner signs the runtime's envelope ids; it is safe for concurrent
// use.
type idSigner struct{ pool sync.Pool }

// macState is one HMAC and its scratch space, reused through the pool.
type macState struct {
	h   hash.Hash
	in  []byte
	sum [sha256.Size]byte
}

func newIDSigner(key []byte) *idSigner {
	key = append([]byte(nil), key...)
	g := &idSigner{}
	g.pool.New = func() any { return &macState{h: hmac.New(sha256.New, key)} }
	return g
}

// mac appends to buf the first idTagLen hex digits of the HMAC of
// prefix+s.
func (g *idSigner) mac(buf []byte, prefix, s string) []byte {
	m := g.pool.Get().(*macState)
	m.in = append(append(m.in[:0], prefix...), s...)
	return g.sum(m, buf)
}

// macOf appends to buf the first idTagLen hex digits of the HMAC of s.
func (g *idSigner) macOf(buf, s []byte) []byte {
	m := g.pool.Get().(*macState)
	m.in = append(m.in[:0], s...)
	return g.sum(m, buf)
}

// sum appends to buf the first idTagLen hex digits of the HMAC of m.in,
// and puts m back.
func (g *idSigner) sum(m *macState, buf []byte) []byte {
	m.h.Reset()
	m.h.Write(m.in)
	sum := m.h.Sum(m.sum[:0])
	buf = hex.AppendEncode(buf, sum[:idTagLen/2])
	g.pool.Put(m)
	return buf
}

// sign returns base with its signature.
func (g *idSigner) sign(base string) string {
	var room [160]byte
	buf := append(room[:0], base...)
	buf = append(buf, '~')
	return string(g.mac(buf, "", base))
}

// HeaderOwn carries, on every envelope the runtime publishes (System.Send),
// the proof that it is the runtime's own: an HMAC of its id with the
// session's key, different from the id's signature. Ids appear in events;
// the proof appears only on the session's edges and inboxes, which no
// outside role may read, so an outside client that saw an id cannot
// present one of its envelopes as the runtime's.
const HeaderOwn = "Sy-Own"

// proof is the HeaderOwn value of id.
func (g *idSigner) proof(id string) string {
	var buf [idTagLen]byte
	return string(g.mac(buf[:0], "own\x00", id))
}

// envelopeID is the id of the envelope a node's firing sends to target:
// sign(<session>.<node>.<firing>.<target>), made in one allocation (the
// base, its firing's number, the signed buffer and the string were four).
func (s *System) envelopeID(node string, firing uint64, target string) string {
	var buf [160]byte
	b := append(buf[:0], s.cfg.SessionID...)
	b = append(b, '.')
	b = append(b, node...)
	b = append(b, '.')
	b = strconv.AppendUint(b, firing, 10)
	b = append(b, '.')
	b = append(b, target...)
	n := len(b)
	b = append(b, '~')
	return string(s.ids.macOf(b, b[:n]))
}

// MintID signs base as an id of the runtime's (the session's input
// envelope): deterministic for this session, unpredictable from outside.
func (s *System) MintID(base string) string { return s.ids.sign(base) }

// MintID signs base with key as System.MintID does for a System whose
// Config.IDKey is key (a session's input, before its actors are made).
func MintID(key []byte, base string) string { return newIDSigner(key).sign(base) }
