package actors

import (
	"bytes"
	"sync"

	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// decodedCache keeps the envelopes the intake decoded to check them, by
// message id, for the consumer's delivery of the same message
// (deliverDurable), which would decode the same bytes again: through the
// intake every outside envelope was decoded twice. A delivery takes its
// envelope only when the bytes it carries are the ones the intake decoded
// (a publish the stream de-duplicated may have carried others). What no
// delivery takes (a de-duplicated publish, a delivery to another process
// or long after) goes with its generation: two of at most decodedKeep
// envelopes and decodedKeepBytes each, so a session holds no more than
// 2 × decodedKeep of them and twice 2 × decodedKeepBytes (the bytes and
// the envelope decoded from them), none while nothing comes through its
// intake. An outside client that floods the intake with envelopes of the
// largest size while the node is slow makes it hold no more: an envelope
// larger than decodedMaxBytes is not kept at all (its delivery decodes).
type decodedCache struct {
	mu        sync.Mutex
	cur, prev map[string]decodedEnv
	curBytes  int // the bytes of the envelopes in cur
}

// decodedKeep bounds a generation of the decodedCache: what the intake
// received and the consumer has not delivered yet is a publisher's window
// ahead (10,000 in the ingest benchmark); beyond it, deliveries decode.
// decodedKeepBytes bounds its bytes, and decodedMaxBytes the envelopes it
// keeps: small ones, whose decode is a large share of their cost.
const (
	decodedKeep      = 4096
	decodedKeepBytes = 4 << 20
	decodedMaxBytes  = 16 << 10
)

type decodedEnv struct {
	data []byte
	env  *pb.Envelope
}

// put keeps env, decoded from data, for the delivery of message id.
func (c *decodedCache) put(id string, data []byte, env *pb.Envelope) {
	if id == "" || len(data) > decodedMaxBytes {
		return
	}
	c.mu.Lock()
	if len(c.cur) >= decodedKeep || c.curBytes+len(data) > decodedKeepBytes {
		c.prev, c.cur, c.curBytes = c.cur, nil, 0
	}
	if c.cur == nil {
		c.cur = make(map[string]decodedEnv)
	}
	if old, ok := c.cur[id]; ok {
		c.curBytes -= len(old.data)
	}
	c.cur[id] = decodedEnv{data: data, env: env}
	c.curBytes += len(data)
	c.mu.Unlock()
}

// take returns the envelope kept for message id if it was decoded from
// data (nil otherwise), and forgets it: the caller owns it.
func (c *decodedCache) take(id string, data []byte) *pb.Envelope {
	if id == "" {
		return nil
	}
	c.mu.Lock()
	d, ok := c.cur[id]
	if ok {
		delete(c.cur, id)
		c.curBytes -= len(d.data)
	} else if d, ok = c.prev[id]; ok {
		delete(c.prev, id)
	}
	c.mu.Unlock()
	if !ok || !bytes.Equal(d.data, data) {
		return nil
	}
	return d.env
}
