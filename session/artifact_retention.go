package session

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard/switchyard/actors"
	"github.com/switchyard/switchyard/broker"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// Retention of a durable session's artifacts. A node's outputs that are
// files — an agent's response when the node has an outgoing edge, the
// files of its artifacts attribute — are objects of the session's store,
// named <node>/<firing>/<file>, and the envelopes it sends refer to them.
// Without a bound a session running for weeks would keep an object per
// firing. The rule ties them to the journal's compaction floor:
//
//   - an object is deleted once it has been in the store for JournalKeep
//     commits (the journal keeps its last JournalKeep records, so no
//     history entry or checkpoint a fork may start from is younger than
//     it: the commits that produced it were compacted), and
//   - only when no live envelope refers to it: none pending in the journal
//     (produced and not yet consumed — waiting in a buffer, a join, a
//     manual gate), none in the work stream (what nodes have not consumed,
//     outside envelopes among it).
//
// The sweep runs on a goroutine of the session's every compactEvery
// commits (when the journal compacts); it remembers which objects it saw
// at each of its last JournalKeep/compactEvery sweeps, so an object is
// old once a sweep that long ago saw it. After a restart the memory starts
// empty: deletion is delayed, never early. Files uploaded for an outside
// envelope (switchyard pub --file, inbox/<envelope id>/<file>) follow the
// same rule: kept while an envelope refers to them, and JournalKeep
// commits at least.

// sweeper deletes a durable session's artifacts past their retention.
type sweeper struct {
	js      jetstream.JetStream
	session string
	pending func() map[string]bool // refs of the journal's pending envelopes
	log     func(msg string, args ...any)

	kick chan struct{}
	quit chan struct{}
	wg   sync.WaitGroup

	mu   sync.Mutex
	last uint64 // the commit of the last kick

	gens    []generation  // object names seen by each of the last sweeps, oldest first
	maxGap  uint64        // the most commits between two sweeps (tests, measurements; the sweep's goroutine)
	swept   atomic.Uint64 // the last commit the last sweep knew of (tests)
	deleted atomic.Int64  // objects deleted so far (tests, measurements)
	sweeps  atomic.Int64  // sweeps done
}

func newSweeper(js jetstream.JetStream, session string, pending func() map[string]bool, log func(string, ...any)) *sweeper {
	w := &sweeper{js: js, session: session, pending: pending, log: log,
		kick: make(chan struct{}, 1), quit: make(chan struct{})}
	w.wg.Add(1)
	go w.loop()
	return w
}

// committed notes that the journal saved record seq: every compactEvery
// commits a sweep is due. It never blocks (it is called under the
// journal's lock).
func (w *sweeper) committed(seq uint64) {
	w.mu.Lock()
	due := seq/compactEvery != w.last/compactEvery
	w.last = seq
	w.mu.Unlock()
	if due {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
}

// stop ends the sweeps and waits for the one running.
func (w *sweeper) stop() {
	close(w.quit)
	w.wg.Wait()
}

func (w *sweeper) loop() {
	defer w.wg.Done()
	for {
		select {
		case <-w.quit:
			return
		case <-w.kick:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		go func() {
			select {
			case <-w.quit:
				cancel()
			case <-ctx.Done():
			}
		}()
		if err := w.sweep(ctx); err != nil && ctx.Err() == nil {
			w.log("session: artifact retention", "session", w.session, "err", err)
		}
		cancel()
	}
}

// generations is how many sweeps an object must have been seen by before
// it is old: JournalKeep commits' worth.
func generations() int {
	return max(1, (JournalKeep+int(compactEvery)-1)/int(compactEvery))
}

// sweep deletes the objects a sweep generations() ago saw that no live
// envelope refers to.
func (w *sweeper) sweep(ctx context.Context) error {
	names, err := broker.ArtifactNames(ctx, w.js, w.session)
	if err != nil {
		return err
	}
	now := make(map[string]bool, len(names))
	for _, name := range names {
		now[name] = true
	}
	w.mu.Lock()
	cur := w.last
	w.mu.Unlock()
	// Old: what a sweep saw JournalKeep commits ago or more (sweeps that
	// fell behind a burst of commits are fewer, not later: counting
	// commits, not sweeps, deletes on time all the same).
	old := 0
	for old < len(w.gens) && (w.gens[old].seq+uint64(JournalKeep) <= cur || len(w.gens)-old > generations()) {
		old++
	}
	var live map[string]bool
	for _, g := range w.gens[:old] {
		for _, name := range g.names {
			if !now[name] {
				continue
			}
			if live == nil {
				if live, err = w.liveRefs(ctx); err != nil {
					return err
				}
			}
			if live[name] {
				continue
			}
			if err := broker.DeleteArtifact(ctx, w.js, w.session, name); err != nil {
				return err
			}
			delete(now, name)
			w.deleted.Add(1)
		}
	}
	w.gens = w.gens[old:]
	seen := make([]string, 0, len(now))
	for name := range now {
		seen = append(seen, name)
	}
	if w.sweeps.Load() > 0 {
		w.maxGap = max(w.maxGap, cur-w.swept.Load())
	}
	w.gens = append(w.gens, generation{seq: cur, names: seen})
	w.swept.Store(cur)
	w.sweeps.Add(1)
	return nil
}

// generation is what one sweep saw, and the last commit it knew of.
type generation struct {
	seq   uint64
	names []string
}

// liveRefs are the objects live envelopes refer to: those pending in the
// journal and those in the work stream.
func (w *sweeper) liveRefs(ctx context.Context) (map[string]bool, error) {
	live := w.pending()
	st, err := w.js.Stream(ctx, broker.StreamName(w.session))
	if err != nil {
		return nil, err
	}
	state := st.CachedInfo().State
	if state.Msgs == 0 {
		return live, nil
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{InactiveThreshold: 10 * time.Second})
	if err != nil {
		return nil, err
	}
	// Read to the message after which none is pending; a fetch that gets
	// nothing before then leaves the references unknown, and nothing is
	// deleted.
	for {
		batch, err := cons.FetchNoWait(256)
		if err != nil {
			return nil, err
		}
		n, done := 0, false
		for m := range batch.Messages() {
			n++
			if md, err := m.Metadata(); err == nil && md.NumPending == 0 {
				done = true
			}
			if env, err := actors.DecodeEnvelope(m.Data()); err == nil {
				addRefs(live, w.session, env)
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return nil, err
		}
		if done {
			return live, nil
		}
		if n == 0 {
			return nil, errors.New("session: artifact retention: the work stream could not be read to its end")
		}
	}
}

// addRefs adds the objects of session's store that env refers to.
func addRefs(to map[string]bool, session string, env *pb.Envelope) {
	prefix := broker.ArtifactRef(session, "")
	for _, a := range env.GetPayload().GetArtifacts() {
		if name, ok := strings.CutPrefix(a.GetRef(), prefix); ok {
			to[name] = true
		}
	}
}

// pendingRefs are the objects the journal's pending envelopes refer to.
func (j *journal) pendingRefs() map[string]bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := map[string]bool{}
	for _, env := range j.pending {
		addRefs(out, j.sess, env)
	}
	return out
}
