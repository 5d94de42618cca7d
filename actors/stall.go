package actors

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Stalled feeds. nats.go's Consume asks the server for up to pullBatch
// messages and asks again once half of them arrived — unless its previous
// request is still being sent (its fetchInProgress flag), and then it
// looks again only at the next delivery. When every message still asked
// for arrives meanwhile (the goroutine sending the request waiting for
// the CPU on a loaded machine), no request is left on the server, nothing
// more is delivered, and the feed stands still until its missing
// heartbeats make nats.go ask again: 2 × pullHeartbeat, 4 s. Measured on
// the JetStream consume+ack of internal/benchmark (100,000 events, the
// session's consumer settings): 2 stalls in 12 runs, each leaving the
// consumer with no request waiting and 10,000 messages pending for 4 s.
//
// The consumer's watch catches it. Every stallArm deliveries of a feed arm
// it (a stall needs at least half a pull delivered at once; a feed of
// sparse deliveries costs one question to the server a thousand of them);
// armed, it looks every StallWait whether the feed moved. When it did not, it asks the server once: no request
// waiting (a healthy feed always has one there, messages pending or not)
// and every delivery the server made arrived (nothing on the way) — the
// feed is stalled, and it is stopped and the same consumer consumed again
// from where it was: a new request, the next delivery numbered right after
// the last. Nothing is delivered twice or lost; a wrong guess (nats.go's
// own request on its way at that very moment) shows as a gap in the
// numbering and costs a re-creation (resync.go), not a loss.

// StallWait is how long an armed watch lets a feed stand still before it
// asks the server whether it stalled.
const StallWait = 50 * time.Millisecond

// stallPulls, when above zero, makes every feed ask for that many
// messages and never ask again by itself, and arms the watch every that
// many deliveries (SetFeedStall); otherwise stallArm deliveries, half a
// pull, arm it.
var stallPulls atomic.Int64

const stallArm = pullBatch / 2

// SetFeedStall makes the feeds that start afterwards stall after every k
// deliveries — they ask for k messages and never again by themselves
// (nats.go's heartbeats aside) — and arms their watch every k: a test of
// the stall watch. It returns what restores the default (k ≤ 0 is it).
func SetFeedStall(k int) (restore func()) {
	old := stallPulls.Swap(int64(max(k, 0)))
	return func() { stallPulls.Store(old) }
}

// feedOpts are the pull options of a feed.
func feedOpts() []jetstream.PullConsumeOpt {
	opts := pullOpts()
	if k := stallPulls.Load(); k > 0 {
		opts = append(opts, jetstream.PullMaxMessages(int(k)), jetstream.PullThresholdMessages(-1))
	}
	return opts
}

// armStall arms the watch when d, a feed's delivery number, ends a run of
// deliveries that may have emptied its pull.
func (s *System) armStall(d uint64) {
	every := uint64(stallArm)
	if k := stallPulls.Load(); k > 0 {
		every = uint64(k)
	}
	if d%every == 0 && s.watch.armed.CompareAndSwap(false, true) {
		s.watch.poke()
	}
}

// stallTimer is the armed watch's timer and the delivery number it last
// saw (watchConsumer's).
type stallTimer struct {
	t    *time.Timer
	c    <-chan time.Time // nil: not running
	seen uint64
	f    *feed
}

// start runs the timer for the current feed, if it is not running.
func (st *stallTimer) start(f *feed) {
	if st.c != nil || f == nil {
		return
	}
	st.f, st.seen = f, f.last.Load()
	if st.t == nil {
		st.t = time.NewTimer(StallWait)
	} else {
		st.t.Reset(StallWait)
	}
	st.c = st.t.C
}

// stop stops the timer.
func (st *stallTimer) stop() {
	if st.t != nil {
		st.t.Stop()
	}
	st.c, st.f = nil, nil
}

// stallTick is the armed watch's look at the feed: moved, it looks again
// later; still, the watch is disarmed and the server asked (unstall).
func (s *System) stallTick(ctx context.Context, st *stallTimer) {
	f := st.f
	st.c = nil
	if f != s.currentFeed() {
		st.f = nil
		st.start(s.currentFeed()) // a new feed (a re-creation): watched afresh
		return
	}
	if f.last.Load() != st.seen {
		st.start(f) // from where it is now
		return
	}
	st.f = nil
	s.watch.armed.Store(false)
	s.unstall(ctx, f)
}

// Stalled reports whether a feed whose last delivery was numbered last
// stalled, by its consumer's state: no request waiting and every delivery
// the server made arrived (nothing on the way). The feed is then consumed
// again from last.
func Stalled(info *jetstream.ConsumerInfo, last uint64) bool {
	return info.NumWaiting == 0 && info.Delivered.Consumer == last
}

// currentFeed is the session's feed (nil when none).
func (s *System) currentFeed() *feed {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.feed
}

// unstall asks the server whether f stalled and, if so, consumes the
// consumer again from where f was.
func (s *System) unstall(ctx context.Context, f *feed) {
	s.mu.Lock()
	cons := s.consumer
	s.mu.Unlock()
	if cons == nil || f.torn.Load() {
		return
	}
	ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
	info, err := cons.Info(ictx)
	cancel()
	if err != nil || !Stalled(info, f.last.Load()) {
		return // a request waiting, or deliveries on the way (the heartbeats and the gap check see to those)
	}
	s.mu.Lock()
	if s.feed != f || s.consumeEnded {
		s.mu.Unlock()
		return
	}
	s.feed = nil
	s.mu.Unlock()
	f.stop()
	nf, err := s.consume(cons, f.last.Load())
	if err != nil {
		s.resync(ctx, "the feed stalled and could not be restarted: "+err.Error())
		return
	}
	s.stallRestarts.Add(1)
	s.log.Debug("actors: the consumer's feed stalled (no pull waiting): consumed again",
		"pending", info.NumPending, "delivered", info.Delivered.Consumer)
	s.mu.Lock()
	if s.consumeEnded {
		s.mu.Unlock()
		nf.stop()
		return
	}
	s.feed = nf
	s.mu.Unlock()
}

// FeedRestarts is how many times the session's feed was found stalled and
// consumed again.
func (s *System) FeedRestarts() int64 { return s.stallRestarts.Load() }
