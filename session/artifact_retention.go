package session

import (
	"context"
	"errors"
	"strconv"
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
//   - an object is deleted once the record of the firing that made it is
//     JournalKeep records behind the last one written (the journal keeps
//     its last JournalKeep records, so no history entry or checkpoint a
//     fork may start from is younger than it: the record was compacted),
//     and
//   - only when no live envelope refers to it: none pending in the journal
//     (produced and not yet consumed — waiting in a buffer, a join, a
//     manual gate), none in the work stream (what nodes have not consumed,
//     outside envelopes among it).
//
// An object is made before its firing's record is numbered (the record is
// queued when the firing commits, and written later by the journal's
// writer), so age is never judged by the records written when a sweep
// sees an object. A firing tells the journal before it stores its first
// object (actors.Config.Storing); a sweep lists the store, then reads the
// last record numbered and the firings that stored objects and have no
// record yet. An object it lists whose firing has a record has a record
// numbered at most that; the objects of firings without one are left out
// of the sweep, and counted from a later one. So every object a sweep saw
// has its record (if any: a firing that failed may leave objects no
// envelope refers to) at or below that sweep's number, and the sweep's
// objects are old once JournalKeep records above it were written. A
// firing that stores an object again (a firing run again after a restart,
// under the same number) makes the earlier sweeps forget the firing's
// objects.
//
// The sweep runs on a goroutine of the session's every compactEvery
// commits (when the journal compacts); it remembers the objects each of its
// sweeps saw until they are old. After a restart the memory starts empty:
// an object made before it (its record, if any, numbered before the
// restart) is counted from the first sweep that sees it: deletion is
// delayed, never early. Files uploaded for an outside envelope (switchyard
// pub --file, inbox/<envelope id>/<file>) have no firing: kept while an
// envelope refers to them, and at least JournalKeep records after a sweep
// first saw them.

// sweeper deletes a durable session's artifacts past their retention.
type sweeper struct {
	js       jetstream.JetStream
	session  string
	keep     uint64                                      // the records the journal keeps (journal.keep)
	pending  func() map[string]bool                      // refs of the journal's pending envelopes
	numbered func() numbering                            // the journal's last record numbered, and the firings storing objects
	claim    func(name string) (release func(), ok bool) // may an object be deleted (journal.claimDelete)
	log      func(msg string, args ...any)

	kick chan struct{}
	quit chan struct{}
	wg   sync.WaitGroup

	mu   sync.Mutex
	last uint64 // the last record written

	gens    []generation  // object names seen by each of the last sweeps, oldest first
	maxGap  uint64        // the most records numbered between two sweeps (tests, measurements; the sweep's goroutine)
	swept   atomic.Uint64 // the last record numbered when the last sweep listed the store (tests)
	judged  atomic.Uint64 // the last record written the last sweep judged by (tests)
	deleted atomic.Int64  // objects deleted so far (tests, measurements)
	sweeps  atomic.Int64  // sweeps done
}

func newSweeper(js jetstream.JetStream, session string, jr *journal, log func(string, ...any)) *sweeper {
	w := &sweeper{js: js, session: session, keep: jr.keep, pending: jr.pendingRefs, numbered: jr.numbered, claim: jr.claimDelete, log: log,
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

// sweep deletes the objects that an earlier sweep saw JournalKeep records
// before the last one written and that no live envelope refers to.
func (w *sweeper) sweep(ctx context.Context) error {
	names, err := broker.ArtifactNames(ctx, w.js, w.session)
	if err != nil {
		return err
	}
	// After the list: an object listed was made after its firing told the
	// journal, so its firing is storing yet or has its record numbered.
	at := w.numbered()
	w.mu.Lock()
	cur := w.last
	w.mu.Unlock()
	now := make(map[string]bool, len(names))
	for _, name := range names {
		if !at.making[firingOf(name)] {
			now[name] = true
		}
	}
	if len(at.remade) > 0 {
		// Objects made again: the earlier sweeps saw another version.
		for i, g := range w.gens {
			kept := g.names[:0]
			for _, name := range g.names {
				if !at.remade[firingOf(name)] {
					kept = append(kept, name)
				}
			}
			w.gens[i].names = kept
		}
	}
	// Old: what a sweep saw when the last record numbered was JournalKeep
	// records or more before the last one written.
	old := 0
	for old < len(w.gens) && w.gens[old].seq+w.keep <= cur {
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
			release, ok := w.claim(name)
			if !ok {
				continue // its firing stores it again: a later sweep judges that one
			}
			err := broker.DeleteArtifact(ctx, w.js, w.session, name)
			release()
			if err != nil {
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
		w.maxGap = max(w.maxGap, at.seq-w.swept.Load())
	}
	w.gens = append(w.gens, generation{seq: at.seq, names: seen})
	w.swept.Store(at.seq)
	w.judged.Store(cur)
	w.sweeps.Add(1)
	return nil
}

// generation is what one sweep saw, and the last record numbered when it
// listed the store: the records of the firings that made those objects
// are at or below it.
type generation struct {
	seq   uint64
	names []string
}

// firingOf is the <node>/<firing>/ prefix of an object's name ("" for a
// name of another form).
func firingOf(name string) string {
	i := strings.IndexByte(name, '/')
	if i < 0 {
		return ""
	}
	k := strings.IndexByte(name[i+1:], '/')
	if k < 0 {
		return ""
	}
	return name[:i+1+k+1]
}

// firingKey names a firing that stores objects.
type firingKey struct {
	node   string
	firing uint64
}

func (k firingKey) prefix() string { return k.node + "/" + strconv.FormatUint(k.firing, 10) + "/" }

// numbering is what a sweep reads of the journal after listing the store.
type numbering struct {
	seq    uint64          // the last record numbered
	making map[string]bool // the <node>/<firing>/ of the firings that stored objects and have no record yet
	remade map[string]bool // those of the firings that started storing since the last sweep
}

// storing notes that a firing stores objects (actors.Config.Storing): until
// its record is numbered, sweeps leave its objects alone. It waits while a
// sweep deletes an earlier version of the firing's objects (claimDelete).
func (j *journal) storing(node string, firing uint64) {
	k := firingKey{node, firing}
	j.mu.Lock()
	for j.deleting[k] {
		j.deletedCond().Wait()
	}
	if j.making == nil {
		j.making, j.remade = map[firingKey]bool{}, map[firingKey]bool{}
	}
	j.making[k] = true
	j.remade[k] = true
	j.mu.Unlock()
}

// numbered is the journal's numbering for a sweep; it forgets the firings
// that started storing since the last call.
func (j *journal) numbered() numbering {
	j.mu.Lock()
	defer j.mu.Unlock()
	at := numbering{seq: j.seq, making: make(map[string]bool, len(j.making))}
	for k := range j.making {
		at.making[k.prefix()] = true
	}
	if len(j.remade) > 0 {
		at.remade = make(map[string]bool, len(j.remade))
		for k := range j.remade {
			at.remade[k.prefix()] = true
		}
		clear(j.remade)
	}
	return at
}

// claimDelete lets a sweep delete object name unless its firing stores
// objects again since the sweep read the numbering (refused: the object may
// be the new version); until release, the firing's storing waits, so a
// sweep never deletes what a firing stores anew.
func (j *journal) claimDelete(name string) (release func(), ok bool) {
	k, isFiring := firingKeyOf(name)
	if !isFiring {
		return func() {}, true
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.making[k] || j.remade[k] {
		return nil, false
	}
	if j.deleting == nil {
		j.deleting = map[firingKey]bool{}
	}
	j.deleting[k] = true
	return func() {
		j.mu.Lock()
		delete(j.deleting, k)
		j.deletedCond().Broadcast()
		j.mu.Unlock()
	}, true
}

// deletedCond signals the end of a sweep's deletion (j.mu held).
func (j *journal) deletedCond() *sync.Cond {
	if j.deleted == nil {
		j.deleted = sync.NewCond(&j.mu)
	}
	return j.deleted
}

// firingKeyOf is the firing an object name <node>/<firing>/<file> belongs
// to.
func firingKeyOf(name string) (firingKey, bool) {
	p := firingOf(name)
	if p == "" {
		return firingKey{}, false
	}
	node, num, _ := strings.Cut(strings.TrimSuffix(p, "/"), "/")
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return firingKey{}, false
	}
	return firingKey{node, n}, true
}

// liveRefs are the objects live envelopes refer to: those pending in the
// journal and those in the work stream above the session consumer's
// acknowledgement floor. What lies at or below it was consumed (its
// firing's record is stored, and what that firing sent is pending in the
// journal or in the stream above): the stream keeps it for its duplicate
// window only (journal.trim), and reading it would make each sweep decode
// the whole window.
func (w *sweeper) liveRefs(ctx context.Context) (map[string]bool, error) {
	live := w.pending()
	st, err := w.js.Stream(ctx, broker.StreamName(w.session))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return live, nil // not made yet (actors.Config.MakeStream): nothing came from outside
	}
	if err != nil {
		return nil, err
	}
	state := st.CachedInfo().State
	if state.Msgs == 0 {
		return live, nil
	}
	from := state.FirstSeq
	if c, err := st.Consumer(ctx, actors.ConsumerName); err == nil {
		from = max(from, c.CachedInfo().AckFloor.Stream+1)
	}
	if from > state.LastSeq {
		return live, nil
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{InactiveThreshold: 10 * time.Second,
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from})
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
