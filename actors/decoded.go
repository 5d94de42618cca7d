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
// envelopes each, so a session holds no more than 2 × decodedKeep of them,
// none while nothing comes through its intake.
type decodedCache struct {
	mu        sync.Mutex
	cur, prev map[string]decodedEnv
}

// decodedKeep bounds a generation of the decodedCache: what the intake
// received and the consumer has not delivered yet is a publisher's window
// ahead (10,000 in the ingest benchmark); beyond it, deliveries decode.
const decodedKeep = 4096

type decodedEnv struct {
	data []byte
	env  *pb.Envelope
}

// put keeps env, decoded from data, for the delivery of message id.
func (c *decodedCache) put(id string, data []byte, env *pb.Envelope) {
	if id == "" {
		return
	}
	c.mu.Lock()
	if len(c.cur) >= decodedKeep {
		c.prev, c.cur = c.cur, nil
	}
	if c.cur == nil {
		c.cur = make(map[string]decodedEnv)
	}
	c.cur[id] = decodedEnv{data: data, env: env}
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
	} else if d, ok = c.prev[id]; ok {
		delete(c.prev, id)
	}
	c.mu.Unlock()
	if !ok || !bytes.Equal(d.data, data) {
		return nil
	}
	return d.env
}
