package session

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/switchyard/switchyard/actors"
	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/internal/crash"
)

// The durable journal's writer. A commit does no I/O: it applies the
// firing to the state in memory and queues its record (CommitAsync, from
// the node's actor). One writer goroutine writes what is queued: it takes
// every record queued so far, publishes them at once on the bucket's stream
// (each fenced by the sequence expected before it), waits for their
// acknowledgements together, writes a snapshot when one is due, and then
// tells each record's committer, in order. Commits that arrive meanwhile
// queue up and make the next batch: the journal costs one round trip per
// batch, not per firing, and a node fires its next input while its last
// firing's record is on its way. A committer acts on a firing (publishes its
// outputs, acknowledges its inputs) only once told its record is stored, so
// an acknowledged input always has its firing journaled.
//
// The writer runs while records are due and ends when none is left (an idle
// session has no writer goroutine); flush waits for it. Its writes, and every
// other write of the bucket (the fence is one sequence), hold j.wmu; the
// state (j.mu) is held only to take a batch and to settle it, never while
// waiting for the store. Lock order: wmu, then mu.

// taken is a batch of records the writer took, and what goes with it.
type taken struct {
	ctx     context.Context
	recs    []pendingRecord
	snap    *Checkpoint       // the state after the last record, when a snapshot is due
	compact uint64            // purge the records older than the kept ones (journal.keep) before this one, covered by a stored snapshot (0: not now)
	floors  map[string]uint64 // trim the work stream below these (nil: not now)
	snapErr bool              // the error came from the snapshot, not a record
	entries []entry           // the records as written
	later   []pendingRecord   // records queued after a failed batch: they fail too
	// pre and post are keyed entries written before and after the records
	// in the same window, and point a kill point reached once the last
	// record is sent (recordStart).
	pre, post []entry
	point     string
	// sent is the first window of entries, when the batch's committer
	// sent it itself (sendEarly): the writer waits for its
	// acknowledgements.
	sent *sentWindow
}

// CommitAsync implements actors.AsyncJournal: the commit is applied and its
// record queued; done is called once the record is stored (durable), at
// once otherwise (a sparse policy holding it, a session that is not
// durable, a journal already broken). It never waits for I/O; done may be
// called on the caller's goroutine or on the writer's, and must not block.
func (j *journal) CommitAsync(ctx context.Context, c *actors.Commit, done func(error)) {
	j.mu.Lock()
	if j.kv == nil {
		err := j.commitFileLocked(c)
		j.mu.Unlock()
		done(err)
		return
	}
	if j.broken != nil {
		err := j.broken
		j.mu.Unlock()
		done(err)
		return
	}
	j.apply(c)
	if c.Status != "" {
		j.unsaved++
	}
	final := j.status != "running"
	var since time.Duration // since the last write: read only for a policy that says every so long
	if j.policy.Every > 0 {
		since = j.clk.Now().Sub(j.lastWrite)
	}
	hold := !j.policy.due(j.unsaved, since, c.Status == "fail", final)
	// A pure firing (actors.Commit.Pure) is not waited for: its record is
	// held for the next record that is, to be written with it in one entry
	// — or, when none comes within pureLinger, written alone.
	pure := !hold && c.Pure && c.Status != "fail" && !final && !j.policy.sparse()
	wait := done
	if hold || pure {
		wait = nil
		// Its committer is told now and may reuse its lists (AsyncJournal):
		// the record held keeps copies of them.
		c = heldCommit(c)
	}
	j.appendRecordLocked(ctx, c, nil, hold || pure, wait)
	if hold || pure {
		if pure {
			j.lingerLocked()
		}
		j.mu.Unlock()
		done(nil)
		return
	}
	j.startWriterLocked()
	j.mu.Unlock()
}

// pureLinger is how long (in ns) the record of a pure firing waits for a
// record that is waited for (the firing it caused, usually), to go in the
// same entry: 1 ms of wall time, not of the session's clock — it bounds
// how late the store shows the firing, and nobody waits for that record.
var pureLinger atomic.Int64

func init() { pureLinger.Store(int64(time.Millisecond)) }

// lingerLocked arms the timer that writes the records held for a pure
// firing when no other record came to take them (j.mu held).
func (j *journal) lingerLocked() {
	if j.lingering || j.lingerOff {
		return
	}
	j.lingering = true
	if j.linger == nil {
		j.linger = time.AfterFunc(time.Duration(pureLinger.Load()), j.lingered)
		return
	}
	j.linger.Reset(time.Duration(pureLinger.Load()))
}

// lingered writes the records held for a pure firing, unless a record
// that was waited for took them meanwhile (the timer's goroutine).
func (j *journal) lingered() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.lingering = false
	if j.lingerOff || j.broken != nil || len(j.batch) == 0 || j.due {
		return
	}
	j.due = true
	j.startWriterLocked()
}

// heldCommit is c with its own copies of the lists a record refers to
// (a record held past its committer's done).
func heldCommit(c *actors.Commit) *actors.Commit {
	cc := *c
	cc.Consumed, cc.Seqs, cc.Produced = slices.Clone(c.Consumed), slices.Clone(c.Seqs), slices.Clone(c.Produced)
	return &cc
}

// startWriterLocked starts the writer unless it runs (j.mu held, from a
// committer). When nobody holds the writer's lock, the committer takes
// the batch and sends it itself before it starts the writer, which then
// waits for its acknowledgements (sendEarly): started the other way round,
// the record waited for the new goroutine to be scheduled (10-18 µs of
// each hop of a pipeline on a busy machine) before it was sent, and now
// that wait overlaps the record's round trip.
func (j *journal) startWriterLocked() {
	if j.writing || !j.due {
		return
	}
	j.writing = true
	j.wwg.Add(1)
	var t *taken
	if j.wmu.TryLock() { // never waits: j.mu is held, and wmu is above it
		t = j.takeLocked(nil)
		j.sendEarly(t)
	}
	// On a goroutine of the broker's that keeps its stack: a new one per
	// batch grew its stack through the first write (warm).
	if j.goroutines == nil || !j.goroutines.Go(func() { j.writer(t) }) {
		go j.writer(t)
	}
}

// sendEarly marshals a batch taken and publishes its first window (j.wmu
// and j.mu held, on the committer's goroutine). A batch that does not
// marshal is left to the writer, which meets the error again.
func (j *journal) sendEarly(t *taken) {
	es, err := entries(t.recs)
	if err != nil {
		return
	}
	t.entries = es
	t.sent = j.sendWindow(es[:min(len(es), ackWindow)])
}

// writer writes batches while records are due, the first one first when
// given (its committer took it and holds j.wmu for it: startWriterLocked).
func (j *journal) writer(first *taken) {
	defer j.wwg.Done()
	if j.holdWriter != nil {
		<-j.holdWriter
	}
	if first != nil {
		if j.writeBatch(first) == nil {
			releaseRecords(first.recs)
		}
		j.recycle(first.recs)
		j.wmu.Unlock()
	}
	for {
		j.wmu.Lock()
		j.mu.Lock()
		if !j.due || j.broken != nil || len(j.batch) == 0 {
			j.writing = false
			j.mu.Unlock()
			j.wmu.Unlock()
			return
		}
		t := j.takeLocked(nil)
		j.mu.Unlock()
		if j.writeBatch(t) == nil {
			// Written and told: a batch that failed may be written again
			// (settleLocked keeps its records).
			releaseRecords(t.recs)
		}
		j.recycle(t.recs)
		j.wmu.Unlock()
	}
}

// maxSpare is the most records a batch kept for reuse has room for.
const maxSpare = 4096

// recycle keeps recs, a batch written and told (nothing holds it now),
// for the next batch to fill: a flood of firings queues hundreds of
// records a batch, and a batch grown from nothing each time allocated
// about three records' room per record.
func (j *journal) recycle(recs []pendingRecord) {
	if cap(recs) == 0 || cap(recs) > maxSpare {
		return
	}
	clear(recs) // what they point to goes
	j.mu.Lock()
	if j.spare == nil || cap(j.spare) < cap(recs) {
		j.spare = recs[:0]
	}
	j.mu.Unlock()
}

// writeHeld writes every record queued or held, with ctx (j.wmu held, j.mu
// not): a flush.
func (j *journal) writeHeld(ctx context.Context) error {
	j.mu.Lock()
	if j.broken != nil {
		err := j.broken
		j.mu.Unlock()
		return err
	}
	if len(j.batch) == 0 {
		j.mu.Unlock()
		return nil
	}
	t := j.takeLocked(ctx)
	j.mu.Unlock()
	return j.writeBatch(t)
}

// takeLocked takes every record queued (j.mu held), with ctx (nil: the
// last record's committer's), and the snapshot of the state after them
// when one is due.
func (j *journal) takeLocked(ctx context.Context) *taken {
	t := &taken{recs: j.batch}
	j.batch, j.due = nil, false
	if ctx == nil {
		ctx = t.recs[len(t.recs)-1].ctx
	}
	t.ctx = ctx
	j.unsaved, j.lastWrite = 0, j.clk.Now()
	first, last := t.recs[0].seq, t.recs[len(t.recs)-1].seq
	compact := last/compactEvery != (first-1)/compactEvery
	// The state's size is asked only when it decides (it makes the
	// current context: ctxVal).
	due := j.status != "running" && !j.goneAtEndLocked()
	if !due && (compact || last-j.snapAt >= snapshotEvery) {
		size := j.snapshotSize()
		due = last-j.snapAt >= max(snapshotEvery, size) || (compact && size <= snapshotEvery)
	}
	if due {
		t.snap = j.snapshot()
		j.snapAt = last
	}
	if compact {
		// The records purged must lie before a stored snapshot: this
		// batch's, or the last one written (j.wmu held).
		bound := j.snapStored
		if t.snap != nil {
			bound = last
		}
		if bound > j.keep {
			t.compact = bound
		}
		t.floors = copyMap(j.floors)
	}
	return t
}

// goneAtEndLocked says that the session's store is removed now that it
// ended (it succeeded and its policy keeps nothing: cleanup) and that no
// run directory mirrors its snapshots (j.mu held): its last snapshot, the
// whole state marshalled, would be written to be deleted a moment later.
// Its records say how it ended, should the removal not happen (a resume
// applies them over the snapshot before).
func (j *journal) goneAtEndLocked() bool {
	return j.status == "success" && j.cleanup && j.dir == ""
}

// snapshotSize is about how many entries a snapshot of the state holds
// (j.mu held): its nodes' counters, its context keys, the envelopes
// pending and the nodes' floors.
func (j *journal) snapshotSize() uint64 {
	n := len(j.visits) + len(j.pending) + len(j.floors)
	if m := j.cur.get(); m != nil {
		n += m.Len()
	}
	return uint64(n)
}

// writeBatch writes a batch taken (j.wmu held), settles the journal and
// tells the committers, in order; it returns what they were told.
func (j *journal) writeBatch(t *taken) error {
	err := j.writeTaken(t)
	j.mu.Lock()
	err = j.settleLocked(t, err)
	j.mu.Unlock()
	for _, r := range t.recs {
		if r.done != nil {
			r.done(err)
		}
	}
	for _, r := range t.later {
		if r.done != nil {
			r.done(err)
		}
	}
	return err
}

// window is what a batch writes, its records' entries es in the middle:
// the keyed entries before and after them, and its kill point on the last
// record.
func (t *taken) window(es []entry) []entry {
	if t.pre == nil && t.post == nil {
		return es
	}
	if t.point != "" && len(es) > 0 {
		es[len(es)-1].point = t.point
	}
	return append(append(append(make([]entry, 0, len(t.pre)+len(es)+len(t.post)), t.pre...), es...), t.post...)
}

// writeTaken writes a batch's records, then its snapshot (j.wmu held).
func (j *journal) writeTaken(t *taken) error {
	es := t.entries
	if t.sent == nil {
		var err error
		if es, err = entries(t.recs); err != nil {
			return err
		}
		t.entries = es
	}
	if err := j.writeRecordsSent(t.ctx, t.window(es), t.sent); err != nil {
		return err
	}
	crash.Point("after-record")
	if t.snap != nil {
		crash.Point("before-snapshot")
		ctx, cancel := clock.WithTimeout(t.ctx, j.clk, broker.RideThrough+time.Minute)
		defer cancel()
		if err := j.writeSnapshot(ctx, t.snap); err != nil {
			t.snapErr = true
			return err
		}
		j.snapStored = t.snap.Seq
	}
	if t.floors != nil {
		j.maintainLocked(t.compact, t.floors)
	}
	if j.onSaved != nil {
		rs := make([]savedRecord, 0, len(t.recs))
		for _, r := range t.recs {
			if r.node != "" {
				rs = append(rs, savedRecord{seq: r.seq, node: r.node})
			}
		}
		if len(rs) > 0 {
			j.onSaved(rs)
		}
	}
	crash.Point("batch-acked") // stored; no committer told yet
	return nil
}

// settleLocked records how a batch went (j.mu held) and returns what its
// committers are told. A batch cut short by its context (the session
// stopping) goes back to the front of the queue for a flush — rewriting a
// record that was stored is harmless, its key is its sequence — and is not
// due until then. A batch the store refused breaks the journal: nothing is
// written after it (the records queued behind it fail as well), so what is
// stored stays a consistent prefix.
func (j *journal) settleLocked(t *taken, err error) error {
	switch {
	case err == nil:
		return nil
	case t.ctx.Err() != nil:
		back := make([]pendingRecord, 0, len(t.recs)+len(j.batch))
		if t.entries == nil {
			for _, r := range t.recs {
				r.ctx, r.done = context.Background(), nil
				back = append(back, r)
			}
		}
		for _, e := range t.entries {
			back = append(back, pendingRecord{seq: e.first, last: e.last, data: e.data, ctx: context.Background()})
		}
		j.batch = append(back, j.batch...)
		return err
	}
	if j.broken == nil {
		if t.snapErr {
			j.broken = err
		} else {
			j.broken = fmt.Errorf("checkpoint store: %w", err)
		}
	}
	t.later, j.batch, j.due = j.batch, nil, false
	return j.broken
}

var (
	_ actors.AsyncJournal = (*journal)(nil)
	_ actors.AsyncJournal = timedJournal{}
)

// owedUpkeep is an upkeep maintainLocked skipped.
type owedUpkeep struct {
	last   uint64
	floors map[string]uint64
}

// maintainLocked starts the store's upkeep after a snapshot: the journal's
// compaction (when last > 0) and the work stream's trim below floors. It
// runs on a goroutine of its own, one at a time, so that purges (which the
// server makes in time proportional to what they scan) never hold up the
// records behind them; when one is still running, this one is skipped — the
// next does its work as well (floors only rise, and a compaction purges
// everything below a point). j.wmu held.
func (j *journal) maintainLocked(last uint64, floors map[string]uint64) {
	j.mu.Lock()
	busy := j.maintaining
	j.maintaining = true
	if busy {
		j.owed = &owedUpkeep{last: last, floors: floors} // flush does it if no later one does
	} else {
		j.owed = nil
	}
	j.mu.Unlock()
	if busy {
		return
	}
	var below, keep uint64
	if last > 0 {
		below, keep = j.compactPlanLocked(last)
	}
	j.mwg.Add(1)
	go func() {
		defer j.mwg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if below > 0 || keep > 0 {
			j.compact(ctx, below, keep)
		}
		j.trim(ctx, floors)
		j.mu.Lock()
		j.maintaining = false
		j.mu.Unlock()
	}()
}
