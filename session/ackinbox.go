package session

import (
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/switchyard/switchyard/broker"
)

// The inboxes the journals' records are acknowledged on (recordAcks) are
// kept from one session to the next of a broker: an inbox is a wildcard
// subscription, and the server's subscription list checks every subject it
// has cached against a wildcard subscription made or removed (up to a
// thousand, one per subject a recent session published on). The inbox of
// each durable Run made and removed them on its critical path: its journal's
// first records waited for that scan, about a tenth of a 10-node pipeline's
// Run. An inbox kept belongs to one journal at a time; its numbering goes
// on, so an acknowledgement that comes late for the journal before is told
// apart (and dropped) like one that comes late for its own batch.

// ackInbox is one inbox: its subscription, the channel the connection's
// reader fills, the connection's status changes and the number of its next
// publish.
type ackInbox struct {
	nc     *nats.Conn
	sub    *nats.Subscription
	ch     chan *nats.Msg
	status chan nats.Status
	prefix string
	next   uint64
}

// newAckInbox subscribes a new inbox on nc.
func newAckInbox(nc *nats.Conn) (*ackInbox, error) {
	in := &ackInbox{nc: nc, prefix: nc.NewInbox() + ".", ch: make(chan *nats.Msg, 4*ackWindow)} // a window, and what came late for the one before
	sub, err := nc.ChanSubscribe(in.prefix+"*", in.ch)
	if err != nil {
		return nil, err
	}
	_ = sub.SetPendingLimits(-1, -1)
	in.sub = sub
	in.status = nc.StatusChanged(nats.DISCONNECTED, nats.RECONNECTING)
	return in, nil
}

// drain drops what the inbox received and its status changes.
func (in *ackInbox) drain() {
	for {
		select {
		case <-in.ch:
		case <-in.status:
		default:
			return
		}
	}
}

// close ends the inbox's subscription.
func (in *ackInbox) close() {
	_ = in.sub.Unsubscribe()
	in.nc.RemoveStatusListener(in.status)
}

// maxFreeInboxes bounds the inboxes a broker keeps: as many as its
// sessions flushed their journals at once, up to this.
const maxFreeInboxes = 64

// ackPool is the inboxes a broker keeps for the journals of its
// connection.
type ackPool struct {
	nc     *nats.Conn
	mu     sync.Mutex
	free   []*ackInbox
	closed bool
}

// ackPools are the brokers' pools.
var ackPools sync.Map // *broker.Broker → *ackPool

// ackPoolOf is b's pool, made on first use and emptied when b closes; nil
// when b is closing.
func ackPoolOf(b *broker.Broker) *ackPool {
	return ofBroker(&ackPools, b, func() *ackPool { return &ackPool{nc: b.Conn()} }, (*ackPool).close)
}

// get is an inbox on nc: one kept, or a new one.
func (p *ackPool) get(nc *nats.Conn) (*ackInbox, error) {
	if p != nil && nc == p.nc {
		p.mu.Lock()
		if n := len(p.free); n > 0 {
			in := p.free[n-1]
			p.free[n-1] = nil
			p.free = p.free[:n-1]
			p.mu.Unlock()
			return in, nil
		}
		p.mu.Unlock()
	}
	return newAckInbox(nc)
}

// put keeps in for the next journal, or closes it (a pool closed or full,
// an inbox of another connection, or none valid any more).
func (p *ackPool) put(in *ackInbox) {
	in.drain()
	if p != nil && in.nc == p.nc && in.sub.IsValid() {
		p.mu.Lock()
		if !p.closed && len(p.free) < maxFreeInboxes {
			p.free = append(p.free, in)
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
	}
	in.close()
}

// close closes the inboxes kept (the broker is closing).
func (p *ackPool) close() {
	p.mu.Lock()
	free := p.free
	p.free, p.closed = nil, true
	p.mu.Unlock()
	for _, in := range free {
		in.close()
	}
}
