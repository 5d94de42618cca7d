package actors

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard/switchyard/broker"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// Lost deliveries. The session's consumer waits a year for an
// acknowledgement (consumerAckWait), so a delivery the server sent that
// never reached the process — on a connection that died, a route between
// servers that broke, a consumer leader that went away with the pull —
// counts as delivered and is never sent again while the process lives.
// The process notices and consumes again from the consumer's
// acknowledgement floor:
//
//   - The consumer numbers its deliveries (the consumer sequence in each
//     message's reply subject) without gaps. A delivery whose number skips
//     one means one was lost: nothing more of that feed reaches a node
//     (deliverFed), so no node ever holds a message past a lost one.
//   - A lost delivery with none after it shows no gap. When the connection
//     reconnects, or the pull's heartbeats stop, or the consumer's leader
//     changes, the process asks the server how many deliveries it made
//     (ConsumerInfo); if the feed has not had them all tailGrace later,
//     some were lost (lostTail).
//
//   - An acknowledgement is sent and not waited for: one on its way when
//     the server went (a restart) is lost, and the server holds that
//     message as delivered and unacknowledged for good — holding the
//     consumer's acknowledgement floor, and so the work stream's trim,
//     below it. After a reconnect (or the other looks above) the process
//     compares the server's count of unacknowledged deliveries with the
//     envelopes its nodes hold (System.held); when the server counts more
//     and its acknowledgement floor has not moved tailGrace later, some
//     acknowledgements were lost (lostAcks).
//
// Either way the feed is stopped and the consumer re-created from the
// server's acknowledgement floor (refeed): every message above it is
// delivered again. One re-creation makes good every loss of the feed it
// stops, also a gap that feed showed while the process was comparing the
// server's counts. A node recognises by stream sequence what it already
// has (nodeActor.track): a message it holds gets the new delivery's
// acknowledgement handle (an acknowledgement goes to the new consumer), one
// it consumed is acknowledged again and dropped. That is exact because of
// the first rule: every message of a node's subjects up to the highest it
// received reached it.
//
// Why not a short AckWait with progress acknowledgements for the envelopes
// that wait: a session may hold a million envelopes in buffers, joins and
// gates, and each would cost a message to the server per AckWait, for as
// long as it waits, healthy or not. A re-creation costs the envelopes above
// the acknowledgement floor once, and only after a fault.

// tailGrace is how long deliveries the server counts may take to reach
// the feed before they are taken for lost (they are on the wire or in the
// client's buffer, microseconds to milliseconds; a false alarm costs a
// re-creation, not a loss).
const tailGrace = 2 * time.Second

// feed is one Consume of the session's consumer.
type feed struct {
	cc   jetstream.ConsumeContext
	last atomic.Uint64 // the consumer sequence of its last delivery
	torn atomic.Bool   // a delivery is missing: nothing more reaches a node
}

func (f *feed) stop() {
	f.torn.Store(true)
	f.cc.Stop()
	<-f.cc.Closed()
}

// consumerWatch is the goroutine that re-creates the consumer.
type consumerWatch struct {
	wake   chan struct{} // one pending wake-up
	gap    atomic.Bool   // a feed lost a delivery: re-create
	check  atomic.Bool   // the connection or the pull was lost: look
	why    atomic.Value  // string: what the gap was
	armed  atomic.Bool   // a feed delivered a run: watch it for a stall (stall.go)
	cancel context.CancelFunc
	done   chan struct{}
}

func (w *consumerWatch) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// consume starts a feed of cons whose first delivery follows delivery
// last of the consumer (0: a new consumer): deliveries go to
// deliverDurable through deliverFed.
func (s *System) consume(cons jetstream.Consumer, last uint64) (*feed, error) {
	f := &feed{}
	f.last.Store(last)
	cc, err := cons.Consume(func(m jetstream.Msg) { s.deliverFed(f, m) }, append(feedOpts(),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			switch {
			case errors.Is(err, jetstream.ErrNoHeartbeat):
				// The pull is gone (a server restarted, the consumer's
				// leader moved): nats.go pulls again; what the old pull
				// had on the way may be lost.
				s.watch.check.Store(true)
				s.watch.poke()
				return
			case errors.Is(err, jetstream.ErrConsumerLeadershipChanged):
				s.watch.check.Store(true)
				s.watch.poke()
			}
			s.log.Warn("actors: consumer", "err", err)
		}))...)
	if err != nil {
		return nil, fmt.Errorf("actors: consume: %w", err)
	}
	f.cc = cc
	return f, nil
}

// deliverFed checks that a delivery of f follows the one before it, and
// hands it to deliverDurable; from the first gap on, nothing of f does.
func (s *System) deliverFed(f *feed, m jetstream.Msg) {
	if f.torn.Load() {
		return
	}
	seq, d, ok := ackSeqs(m.Reply())
	if ok {
		if last := f.last.Load(); d > last+1 {
			f.torn.Store(true)
			s.watch.why.Store(fmt.Sprintf("delivery %d came after %d", d, last))
			s.watch.gap.Store(true)
			s.watch.poke()
			return
		}
		// Also a delivery numbered lower than the last: a new consumer
		// leader whose state was behind delivers again what it does
		// not know was delivered (the nodes recognise it).
		f.last.Store(d)
		s.armStall(d)
	}
	s.deliverDurable(m, seq)
}

// ackSeqs reads the stream and consumer sequences in a JetStream
// delivery's reply subject, $JS.ACK.<stream>.<consumer>.<delivered>.<stream
// seq>.<consumer seq>.<time>.<pending> or, with a domain and an account
// hash after ACK, the same eleven tokens and maybe more; it allocates
// nothing (nats.go's Metadata builds a struct and its strings for every
// delivery). stream is 0 where Metadata would fail or read 0; ok says
// whether the consumer sequence was read (eleven or twelve tokens, or
// nine).
func ackSeqs(reply string) (stream, consumer uint64, ok bool) {
	var dots [12]int
	n := 0
	for i := 0; i < len(reply); i++ {
		if reply[i] == '.' {
			if n < len(dots) {
				dots[n] = i
			}
			n++
		}
	}
	tokens := n + 1
	var at int // the index of the consumer sequence's token
	switch {
	case tokens == 9:
		at = 6
	case tokens >= 11:
		at = 8
	default:
		return 0, 0, false
	}
	if !strings.HasPrefix(reply, "$JS.ACK.") {
		return 0, 0, false
	}
	stream = parseNum(reply[dots[at-2]+1 : dots[at-1]])
	if tokens > 12 {
		return stream, 0, false
	}
	v, err := strconv.ParseUint(reply[dots[at-1]+1:dots[at]], 10, 64)
	return stream, v, err == nil
}

// parseNum is nats.go's reading of a number in a reply subject: 0 for
// anything but digits.
func parseNum(d string) uint64 {
	var n uint64
	for i := 0; i < len(d); i++ {
		c := d[i]
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + uint64(c-'0')
	}
	return n
}

// watchConsumer re-creates the session's consumer when a delivery was
// lost, until ctx ends (stopConsuming).
func (s *System) watchConsumer(ctx context.Context, done chan struct{}) {
	defer close(done)
	nc := s.cfg.JetStream.Conn()
	reconnected := nc.StatusChanged(nats.CONNECTED)
	defer nc.RemoveStatusListener(reconnected)
	var stall stallTimer // stall.go
	defer stall.stop()
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-reconnected:
			if !ok {
				reconnected = nil // the connection closed
				continue
			}
			s.watch.check.Store(true)
		case <-stall.c:
			s.stallTick(ctx, &stall)
			continue
		case <-s.watch.wake:
		}
		if s.watch.armed.Load() {
			stall.start(s.currentFeed())
		}
		switch {
		case s.watch.gap.Swap(false):
			s.watch.check.Store(false)
			why, _ := s.watch.why.Load().(string)
			s.resync(ctx, why)
		case s.watch.check.Swap(false):
			if seen, delivered, lost := s.lostTail(ctx); lost {
				s.resync(ctx, fmt.Sprintf("the server made %d deliveries, %d arrived", delivered, seen))
			} else if s.watch.gap.Load() {
				// A gap showed meanwhile (a delivery after the lost one):
				// its re-creation, next round, is the one to make.
				s.watch.poke()
			} else if pending, held, lost := s.lostAcks(ctx); lost {
				s.resync(ctx, fmt.Sprintf("the server holds %d deliveries unacknowledged, the nodes %d", pending, held))
			}
		}
	}
}

// lostTail reports whether the server counts deliveries to the current
// feed that the feed has not had tailGrace later (lost), with the consumer
// sequence of the feed's last delivery and the server's count.
func (s *System) lostTail(ctx context.Context) (seen, delivered uint64, lost bool) {
	s.mu.Lock()
	f, cons := s.feed, s.consumer
	s.mu.Unlock()
	if f == nil || cons == nil {
		return 0, 0, false
	}
	err := broker.Retry(ctx, 10*time.Second, func(ctx context.Context) error {
		info, err := cons.Info(ctx)
		if err == nil {
			delivered = info.Delivered.Consumer
		}
		return err
	})
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("actors: consumer state", "err", err)
		}
		return 0, 0, false // a loss shows as a gap at the next delivery
	}
	if delivered <= f.last.Load() || !graceOver(ctx) {
		return 0, 0, false
	}
	seen = f.last.Load()
	return seen, delivered, !f.torn.Load() && seen < delivered
}

// lostAcks reports whether acknowledgements the nodes sent were lost on
// the way (the server restarted with them in flight): the server counts
// more deliveries unacknowledged than the nodes hold, and its
// acknowledgement floor stayed where it was for tailGrace. A delivery on
// its way to a node, or an acknowledgement on its way to the server, makes
// the counts differ for a moment, but then the floor moves or the counts
// meet; one that makes them differ for good while the floor stays is
// taken for a loss (a false alarm costs a re-creation, not a loss).
func (s *System) lostAcks(ctx context.Context) (pending, held int64, lost bool) {
	s.mu.Lock()
	cons := s.consumer
	s.mu.Unlock()
	if cons == nil {
		return 0, 0, false
	}
	look := func() (pending, held int64, floor uint64, ok bool) {
		held = s.held.Load()
		info, err := cons.Info(ctx)
		if err != nil {
			return 0, 0, 0, false
		}
		return int64(info.NumAckPending), max(held, s.held.Load()), info.AckFloor.Stream, true
	}
	pending, held, floor, ok := look()
	if !ok || pending <= held || !graceOver(ctx) {
		return 0, 0, false
	}
	pending, held, again, ok := look()
	return pending, held, ok && pending > held && again == floor
}

// graceOver waits tailGrace: false when ctx ended first.
func graceOver(ctx context.Context) bool {
	t := time.NewTimer(tailGrace)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// resync re-creates the consumer and its feed, trying again (every
// second) until it succeeds or ctx ends, and says so: a session.warning
// event (a line in serve's log) and the log.
func (s *System) resync(ctx context.Context, why string) {
	start := uint64(0) // not known yet
	for {
		err := s.refeed(ctx, &start)
		if err == nil {
			msg := fmt.Sprintf("deliveries of the session's consumer were lost on the way (%s): "+
				"its envelopes from stream sequence %d are delivered again", why, start)
			s.log.Warn("actors: " + msg)
			s.Emit(&pb.Event{Kind: "session.warning", Message: msg})
			return
		}
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("actors: re-creating the session's consumer", "err", err)
		t := time.NewTimer(time.Second)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// refeed stops the current feed, re-creates the consumer from *start
// (first read from the consumer's acknowledgement floor) and starts a new
// feed.
func (s *System) refeed(ctx context.Context, start *uint64) error {
	s.mu.Lock()
	old, cons := s.feed, s.consumer
	s.feed = nil
	s.mu.Unlock()
	if old != nil {
		old.stop()
	}
	// A gap the old feed showed is made good here: the new consumer
	// delivers everything above the acknowledgement floor read after the
	// old feed stopped (and a stopped feed shows no more gaps). Left
	// standing, it would make the consumer again for nothing.
	s.watch.gap.Store(false)
	if *start == 0 {
		err := broker.Retry(ctx, 10*time.Second, func(ctx context.Context) error {
			info, err := cons.Info(ctx)
			if err == nil {
				*start = info.AckFloor.Stream + 1
			}
			return err
		})
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			// Gone (a re-creation that failed halfway): from where a
			// restart would start, below every floor since.
			*start = max(s.restartStart(), 1)
		} else if err != nil {
			return err
		}
	}
	if err := s.makeConsumer(ctx, *start, true); err != nil {
		return err
	}
	s.mu.Lock()
	cons = s.consumer
	s.mu.Unlock()
	f, err := s.consume(cons, 0)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.consumeEnded {
		s.mu.Unlock()
		f.stop()
		return nil
	}
	s.feed = f
	s.mu.Unlock()
	return nil
}
