package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchyard/switchyard/actors"
	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/internal/crash"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/scheduler"
)

// A durable session keeps its state in its KV bucket as a journal: one
// record per commit under journal.<seq> (protobuf JournalRecord), and now
// and then a snapshot of the whole state under checkpoint.latest (the JSON
// Checkpoint). The state after record N is the latest snapshot at or
// before N with the records after it applied in order. The records are
// written in batches (journal_writer.go), several to a KV entry; they are
// the session's history.

// snapshotEvery is how many records a durable session writes at least
// between two snapshots; a session whose state is larger (snapshotSize:
// its nodes, context keys, pending envelopes) writes one every as many
// records as its state has entries, so that a snapshot, which marshals the
// whole state, costs about one entry per record whatever the graph's size
// (every 1,024 records, a 10,000-node chain's snapshots were a fifth of its
// CPU). A small state is also snapshotted at each compaction
// (compactEvery), and the last record always has one (but for a session
// whose store is removed at its end: goneAtEndLocked). A resume reads the
// snapshot and the entries after it: at most that many records (and those
// written while the snapshot was due), in entries of up to 64.
const snapshotEvery = 1024

// JournalKeep is how many journal records a durable session keeps: its
// history (switchyard history) and the checkpoints a fork may start from
// are the last JournalKeep commits, and the snapshot holds the state
// before them. Without a bound a session running for weeks would grow its
// bucket, and the server's per-subject index in memory, by a key per
// commit. Older records are purged every compactEvery records. A broker
// may say otherwise for its sessions (broker.Config.JournalKeep).
var JournalKeep = 4096

// compactEvery is how many records pass between two purges of the records
// older than the last JournalKeep.
var compactEvery uint64 = 1024

// Keys of the session's KV bucket.
const (
	latestKey = "checkpoint.latest"
	graphKey  = "graph.dot"
	metaKey   = "session.meta"
	// journalPrefix starts the key of every journal entry (recordKey).
	journalPrefix = "journal."
)

func recordKey(seq uint64) string {
	// fmt.Sprintf("journal.%012d", seq), without fmt: it was 1% of a
	// durable pipeline's CPU (a key per record).
	var digits [20]byte
	d := strconv.AppendUint(digits[:0], seq, 10)
	b := make([]byte, 0, len(journalPrefix)+max(12, len(d)))
	b = append(b, journalPrefix...)
	for range 12 - len(d) {
		b = append(b, '0')
	}
	return string(append(b, d...))
}

// pendingRecord is a record not written yet: held by a sparse checkpoint
// policy, or queued for the journal's writer (journal_writer.go). A record
// is marshalled by the writer, off the committer's goroutine; once it was
// sent in an entry that has to be written again (a write cut short), the
// entry itself is kept (data, up to last), so that an entry is always
// rewritten with the same records under the same key.
type pendingRecord struct {
	seq   uint64
	node  string
	rec   *pb.JournalRecord
	blk   *recordBlock        // rec's, given back once it is written (releaseRecords)
	sched *scheduler.Snapshot // the scheduler's counters after the record
	data  []byte              // a marshalled entry holding seq..last
	last  uint64
	ctx   context.Context // the committer's: a write cut short by it is held for a flush
	done  func(error)     // told once the record is stored, or cannot be (nil: no one waits)
}

// recordBlock is a journal record with its time and its scheduler
// counters (countState), in one allocation, reused once the record is
// written (releaseRecords): a flood of firings made two blocks of about
// 1.2 KB an event for the collector, a tenth of what a durable queue
// ingest allocates.
type recordBlock struct {
	rec   pb.JournalRecord
	ts    timestamppb.Timestamp
	count countRecord
}

// recordBlocks are the record blocks of records written, for the next
// records.
var recordBlocks = sync.Pool{New: func() any { return new(recordBlock) }}

// releaseRecords gives back the blocks of records written (the writer's,
// once they are stored and their committers told: nothing reads them
// again; the entries hold their bytes).
func releaseRecords(recs []pendingRecord) {
	for i := range recs {
		blk := recs[i].blk
		if blk == nil {
			continue
		}
		recs[i].blk, recs[i].rec = nil, nil
		blk.rec.Reset()
		blk.ts.Reset()
		blk.count.reset()
		recordBlocks.Put(blk)
	}
}

// appendRecordLocked queues the record of a commit (or of envelopes added
// outside a firing) after it was applied. With hold (a sparse policy, not
// due) the record is kept in memory until a record that is due; otherwise
// the queue is due, and the writer writes it with every record held before
// it — published together, acknowledged together — and a snapshot when one
// is due. done (which may be nil) is told when the record is stored.
// Without a crash the journal is complete (history, forks); a crash loses
// the records held, whose firings run again when the work still needs them.
func (j *journal) appendRecordLocked(ctx context.Context, c *actors.Commit, added []*pb.Envelope, hold bool, done func(error)) {
	seq := j.seq + 1
	j.at = j.clk.Now()
	blk := recordBlocks.Get().(*recordBlock)
	blk.ts.Seconds, blk.ts.Nanos = j.at.Unix(), int32(j.at.Nanosecond())
	rec := &blk.rec
	rec.Seq, rec.Time, rec.Added = seq, &blk.ts, added
	if c != nil {
		rec.Node, rec.Firing, rec.Status, rec.Reason = c.Node, c.Firing, c.Status, c.Reason
		rec.Consumed, rec.ConsumedSeqs, rec.Floor = c.Consumed, c.Seqs, c.Floor
		rec.Produced, rec.Context, rec.ContextBase, rec.Usage = c.Produced, c.Context, c.Base, c.Usage
		if t := c.Terminal; t != nil {
			rec.TerminalStatus, rec.TerminalReason, rec.TerminalFinal = t.Status, t.Reason, t.Final
		}
	}
	var snap *scheduler.Snapshot
	if c, ok := j.recordCount(rec.Node); ok {
		rec.Sched = blk.count.fill(rec.Node, c)
	} else {
		snap = j.recordSched(rec.Node)
	}
	j.seq = seq
	if c != nil && c.Status != "" && len(j.making) > 0 {
		delete(j.making, firingKey{c.Node, c.Firing}) // its objects' record is numbered (artifact_retention.go)
	}
	if j.batch == nil {
		j.batch, j.spare = j.spare, nil
	}
	j.batch = append(j.batch, pendingRecord{seq: seq, node: rec.Node, rec: rec, blk: blk, sched: snap, ctx: ctx, done: done})
	if !hold {
		j.due = true
	}
}

// compactPlanLocked decides how to purge the journal records older than
// the last JournalKeep (after a snapshot that covers them; last is the
// last record written). Entries hold several records, so what is kept
// starts at the entry holding record last-JournalKeep+1: the entries this
// process wrote are known by their stream sequences (j.written), and
// everything below that entry's is purged (below). After a restart,
// before this process wrote that far, the last JournalKeep entries are
// kept (keep; at least as many records). j.wmu held.
func (j *journal) compactPlanLocked(last uint64) (below, keep uint64) {
	from := last - j.keep + 1
	at := -1
	for i, w := range j.written {
		if w.first > from {
			break
		}
		at = i
	}
	if at < 0 {
		return 0, j.keep
	}
	below = j.written[at].stream
	j.written = append(j.written[:0], j.written[at:]...)
	return below, 0
}

// compact purges the journal entries below the stream sequence below, or
// all but the last keep. A failure is made good by the next one: compaction
// bounds the store, it is not needed for correctness.
func (j *journal) compact(ctx context.Context, below, keep uint64) {
	stream, err := j.js.Stream(ctx, j.kv.Stream())
	if err != nil {
		return
	}
	subject := jetstream.WithPurgeSubject(j.kv.Subject(journalPrefix + ">"))
	if below > 0 {
		_ = stream.Purge(ctx, subject, jetstream.WithPurgeSequence(below))
	} else if keep > 0 {
		_ = stream.Purge(ctx, subject, jetstream.WithPurgeKeep(keep))
	}
}

// writtenEntry is an entry this process wrote: its first record and its
// sequence in the bucket's stream (for compaction).
type writtenEntry struct{ first, stream uint64 }

// trim purges from the session's work stream what its nodes consumed, in
// two steps whose cost does not grow with the graph. First everything at
// or below the session consumer's acknowledgement floor: every message
// there was acknowledged — consumed by a firing whose record is stored,
// or refused — and no resume delivers it again; one purge by sequence,
// which the server makes by dropping whole blocks. Then, for each node
// whose own floor is above that one (an envelope held long elsewhere — a
// join, a manual gate — keeps the consumer's floor low), the messages of
// its inbox and incoming edges at or below its floor (under their own
// subjects and their Stored ones: broker.WorkSubjects), each subject named
// literally: a purge of a wildcard subject scans every subject the stream
// holds, which made the trims of a 10,000-node chain quadratic (two
// thirds of its CPU). What a node has not consumed stays, so the stream
// holds the work in flight, not the session's past. A failure is made
// good by the next trim.
//
// Neither step purges a message stored within the stream's duplicate
// window (windowFloor): the server remembers the Nats-Msg-Id of a message
// it purged only until it restarts — it rebuilds its duplicate window from
// the messages the stream holds — so a client that retries, after the
// server's restart, a publish whose acknowledgement the outage lost would
// have its envelope stored and fired a second time. The stream keeps the
// window's messages, and a trim after the window passed purges them.
func (j *journal) trim(ctx context.Context, floors map[string]uint64) {
	if len(floors) == 0 {
		return
	}
	stream, err := j.js.Stream(ctx, broker.StreamName(j.sess))
	if err != nil {
		return
	}
	if j.trimmed == nil {
		j.trimmed = map[string]uint64{}
	}
	var acked uint64
	if c, err := stream.Consumer(ctx, actors.ConsumerName); err == nil {
		acked = c.CachedInfo().AckFloor.Stream
	}
	// The stream's state was read first: what came after it is in the
	// window.
	below, err := windowFloor(ctx, j.js, stream)
	if err != nil {
		return
	}
	acked = min(acked, below)
	if acked > j.trimmedAll {
		if err := stream.Purge(ctx, jetstream.WithPurgeSequence(acked+1)); err == nil {
			j.trimmedAll = acked
		}
		crash.Point("after-trim") // purged below the consumer's floor, not yet per node
	}
	var inbound map[string][]string
	for node, floor := range floors {
		floor = min(floor, below)
		if floor <= j.trimmedAll || floor <= j.trimmed[node] {
			continue
		}
		if inbound == nil {
			inbound = inboundByNode(j.sess, j.inbound)
		}
		subjects := inbound[node]
		if subjects == nil {
			// Not in the graph any more (a live edit removed it): what
			// its subjects hold is refused at delivery and dropped.
			continue
		}
		ok := true
		for _, subj := range subjects {
			for _, subj := range []string{subj, broker.Stored(subj)} {
				if err := stream.Purge(ctx, jetstream.WithPurgeSubject(subj), jetstream.WithPurgeSequence(floor+1)); err != nil {
					ok = false
				}
			}
		}
		if ok {
			j.trimmed[node] = floor
		}
	}
}

// windowFloor is the highest sequence of the stream that a purge may
// reach: every message at or below it was stored before the stream's
// duplicate window, counted back from its last message's time (both the
// server's clock). It is 0 when the window holds every message, and the
// stream's last sequence when it holds none.
func windowFloor(ctx context.Context, js jetstream.JetStream, stream jetstream.Stream) (uint64, error) {
	info := stream.CachedInfo()
	st := info.State
	if st.Msgs == 0 || info.Config.Duplicates <= 0 {
		return st.LastSeq, nil
	}
	from := st.LastTime.Add(-info.Config.Duplicates)
	if !st.FirstTime.Before(from) {
		return 0, nil // the window holds all of it
	}
	seq, err := firstSince(ctx, js, info.Config.Name, from)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return st.LastSeq, nil
	case err != nil:
		return 0, err
	}
	return seq - 1, nil
}

// inboundByNode groups the inbound subjects of the session's graph
// (inbound(), nil: none) by the node that receives on them: its inbox
// sy.<session>.node.<id>.in and its incoming edges
// sy.<session>.edge.<from>.<id>[.<n>]. Session and node ids hold no dot.
func inboundByNode(sess string, inbound func() []string) map[string][]string {
	out := map[string][]string{}
	if inbound == nil {
		return out
	}
	nodePrefix, edgePrefix := strings.TrimSuffix(broker.NodeIn(sess, ""), ".in"), broker.Edge(sess, "")
	for _, subj := range inbound() {
		var node string
		switch {
		case strings.HasPrefix(subj, nodePrefix):
			node, _, _ = strings.Cut(subj[len(nodePrefix):], ".")
		case strings.HasPrefix(subj, edgePrefix):
			parts := strings.Split(subj[len(edgePrefix):], ".")
			if len(parts) < 2 {
				continue
			}
			node = parts[1]
		default:
			continue
		}
		out[node] = append(out[node], subj)
	}
	return out
}

// firstRecord is the sequence number of the oldest journal record kept (0
// when there is none).
func firstRecord(ctx context.Context, js jetstream.JetStream, r *broker.Record) (uint64, error) {
	key, err := r.First(ctx, js, journalPrefix)
	if err != nil || key == "" {
		return 0, err
	}
	var seq uint64
	if _, err := fmt.Sscanf(strings.TrimPrefix(key, journalPrefix), "%d", &seq); err != nil {
		return 0, fmt.Errorf("session: journal key %s: %w", key, err)
	}
	return seq, nil
}

// maxEntry bounds the size of one journal entry (the server's max_payload
// is 1 MiB by default) and maxEntryRecords its records (compaction keeps
// whole entries): a larger batch is written as several entries.
const (
	maxEntry        = 256 << 10
	maxEntryRecords = 64
)

// entry is a stored journal entry: records first..last, marshalled.
type entry struct {
	first, last uint64
	data        []byte
	// key, when set, is the bucket key the entry is written under instead
	// of a record's (a new session's graph and record of itself, written
	// with its first record: recordStart); point is a kill point reached
	// once the entry is sent.
	key, point string
}

// entries marshals a batch into journal entries: the records queued during
// one write go together, the first record holding the others in its batch
// field, under the first one's key (an entry kept from an earlier attempt
// is kept as it was). Each record is sized once (where the entries split)
// and marshalled with that size (marshalRecord): the first, then each of
// the others as an element of its batch field, which the wire format lets
// follow the first one's other fields (a marshal of the first with its
// batch set sized every record a second time).
func entries(batch []pendingRecord) ([]entry, error) {
	var out []entry
	var cur *pb.JournalRecord
	var more []*pb.JournalRecord // the records cur's batch holds
	var sizes []int              // theirs
	size, curSize := 0, 0        // the batch's, cur's
	flush := func() error {
		if cur == nil {
			return nil
		}
		n := size
		for _, sz := range sizes {
			n += protowire.SizeTag(batchField) + protowire.SizeBytes(sz) - sz
		}
		data, err := marshalRecord(make([]byte, 0, n), cur, curSize)
		for i, rec := range more {
			if err != nil {
				break
			}
			data = protowire.AppendTag(data, batchField, protowire.BytesType)
			data = protowire.AppendVarint(data, uint64(sizes[i]))
			data, err = marshalRecord(data, rec, sizes[i])
		}
		if err != nil {
			return err
		}
		last := cur.GetSeq()
		if n := len(more); n > 0 {
			last = more[n-1].GetSeq()
		}
		out = append(out, entry{first: cur.GetSeq(), last: last, data: data})
		clear(more)
		cur, more, sizes, size = nil, more[:0], sizes[:0], 0
		return nil
	}
	for _, r := range batch {
		if r.data != nil {
			if err := flush(); err != nil {
				return nil, err
			}
			out = append(out, entry{first: r.seq, last: r.last, data: r.data})
			continue
		}
		if r.rec == nil {
			continue // inside an entry kept above
		}
		rec := r.rec
		if r.sched != nil && rec.Sched == nil {
			rec.Sched = schedState(r.sched)
		}
		rec.Batch = nil
		n := rec.SizeVT() // unchanged until marshalled
		if cur != nil && (size+n > maxEntry || len(more)+1 >= maxEntryRecords) {
			if err := flush(); err != nil {
				return nil, err
			}
		}
		if cur == nil {
			cur, curSize = rec, n
		} else {
			more, sizes = append(more, rec), append(sizes, n)
		}
		size += n
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

// marshalRecord appends rec, of size n (SizeVT, unchanged since), to
// data. The record's own marshal code (vtprotobuf, buf.gen.yaml) takes a
// third of the time of google.golang.org/protobuf's reflection: 10% of a
// durable firing's own CPU went to its record's marshal. Like it, it
// stores the strings it is given (a handler's output that is not UTF-8
// included) without checking them; the journal reads them back the same
// way (readRecord).
func marshalRecord(data []byte, rec *pb.JournalRecord, n int) ([]byte, error) {
	l := len(data)
	data = slices.Grow(data, n)[:l+n]
	if _, err := rec.MarshalToSizedBufferVT(data[l:]); err != nil {
		return nil, err
	}
	return data, nil
}

// batchField is the number of JournalRecord's batch field.
var batchField = (&pb.JournalRecord{}).ProtoReflect().Descriptor().Fields().ByName("batch").Number()

// writeRecords publishes the batch's entries and waits for their
// acknowledgements together. What a transient fault (a server restart)
// loses is written again, from the first entry not acknowledged, riding
// through. Each write is fenced: it expects the bucket's last sequence to
// be the one this owner wrote last, so a process that lost its lease
// writes nothing (ErrLeaseLost).
func (j *journal) writeRecords(ctx context.Context, batch []entry) error {
	return j.writeRecordsSent(ctx, batch, nil)
}

// writeRecordsSent is writeRecords of a batch whose first window its
// committer already sent (sent, not nil: sendEarly).
func (j *journal) writeRecordsSent(ctx context.Context, batch []entry, sent *sentWindow) error {
	for len(batch) > 0 {
		n := min(len(batch), ackWindow)
		w := sent
		if w == nil {
			w = j.sendWindow(batch[:n])
		}
		sent = nil
		if err := j.awaitWindow(ctx, batch[:n], w); err != nil {
			return err
		}
		batch = batch[n:]
	}
	return nil
}

// sentWindow is a window of entries published (sendWindow): how many
// went out, and the number of the first one's publish.
type sentWindow struct {
	sent  int
	first uint64
}

// ackWindow is the most entries a writer has on their way at once (their
// acknowledgements wait in the journal's channel).
const ackWindow = 64

// sendWindow publishes up to ackWindow entries, fenced, without waiting
// for their acknowledgements (awaitWindow reads them); j.wmu held.
func (j *journal) sendWindow(batch []entry) *sentWindow {
	_ = j.acks.take(j.js.Conn()) // failing, so does the first publish: the patient way
	j.acks.drain()
	sent := 0
	first := j.acks.next
	// One message for the window: nats.go encodes it as it publishes
	// and keeps nothing of it.
	m := &j.sending
	for i, r := range batch {
		key := r.key
		if key == "" {
			key = recordKey(r.first)
		}
		*m = nats.Msg{Subject: j.kv.Subject(key), Data: r.data}
		switch {
		case j.fence == 0:
		case j.kv.Shared():
			// Every write expects this owner's mark to be the last
			// on its subject (fenceOf): the same header for each.
			m.Header = j.sharedFence()
		default:
			m.Header = nats.Header{jetstream.ExpectedLastSeqHeader: []string{strconv.FormatUint(j.fence+uint64(i), 10)}}
		}
		if err := j.acks.publish(j.js.Conn(), m); err != nil {
			break // disconnected: the rest is written the patient way
		}
		sent++
		if r.point != "" {
			crash.Point(r.point)
		}
	}
	crash.Point("batch-published") // sent, no acknowledgement read yet
	return &sentWindow{sent: sent, first: first}
}

// sharedFence is the header of this owner's writes in the shared bucket
// (fenceOf), made once per fence; j.wmu held.
func (j *journal) sharedFence() nats.Header {
	if j.fenceHdr == nil || j.fenceHdrOf != j.fence {
		j.fenceHdr = nats.Header{
			jetstream.ExpectedLastSubjSeqHeader:     []string{strconv.FormatUint(j.fence, 10)},
			jetstream.ExpectedLastSubjSeqSubjHeader: []string{j.kv.Subject(ownerKey)},
		}
		j.fenceHdrOf = j.fence
	}
	return j.fenceHdr
}

// awaitWindow reads the acknowledgements of a window sendWindow sent and
// writes again, the patient way, what was not stored; j.wmu held.
func (j *journal) awaitWindow(ctx context.Context, batch []entry, w *sentWindow) error {
	sent, first := w.sent, w.first
	wait := j.ackTimer(30 * time.Second) // an acknowledgement that never comes
	defer wait.Stop()
	for i, r := range batch {
		if i < sent {
			seq, ok, err := j.acks.wait(ctx, wait.C(), first+uint64(i))
			if err != nil {
				return err
			}
			if ok {
				j.stored(seq)
				if r.key == "" {
					j.written = append(j.written, writtenEntry{first: r.first, stream: seq})
				}
				continue
			}
			// Refused, or no answer in time: this one and the rest are
			// written the patient way (putRecord tells a lost
			// acknowledgement, a moved fence and a full store apart).
			sent = i
		}
		if r.key != "" {
			if err := j.putKey(ctx, r.key, r.data); err != nil {
				return err
			}
			continue
		}
		if err := j.putRecord(ctx, r.first, r.data); err != nil {
			return err
		}
		if j.fence != 0 {
			j.written = append(j.written, writtenEntry{first: r.first, stream: j.last})
		}
	}
	return nil
}

// ackTimer is the journal's timer for a window's acknowledgements, set to
// fire after d: made once, and reset for each window (j.wmu held). What
// it sent before and nobody read is dropped first (a fake clock's timer
// keeps it).
func (j *journal) ackTimer(d time.Duration) clock.Timer {
	if j.ackWait == nil {
		j.ackWait = j.clk.NewTimer(d)
		return j.ackWait
	}
	j.ackWait.Stop()
	select {
	case <-j.ackWait.C():
	default:
	}
	j.ackWait.Reset(d)
	return j.ackWait
}

// stored notes that a write of this owner was stored at the stream's
// sequence seq; j.wmu held. A session with a bucket of its own moves its
// fence there: the stream's last sequence, which its next write expects.
func (j *journal) stored(seq uint64) {
	j.last = seq
	if j.fence != 0 && !j.kv.Shared() {
		j.fence = seq
	}
}

// fenceOf is the condition a fenced write of the session's bucket sets:
// for a bucket of the session's own, that the stream's last sequence is
// the last this owner knows (j.fence), so that nothing was written since
// by anyone — an owner that lost its lease is refused at its next write;
// in the shared bucket (broker.SharedName), where other sessions write
// between this one's writes, that the last write on the subject of the
// session's owner's mark is this owner's mark (j.fence is its sequence):
// the next owner writes its own mark before anything else, so it refuses
// the writes of the one before as well. The shared bucket's writes of one
// owner are not chained to each other, but the records of a session are
// read in the order of their numbers (readRecord), which stops at the
// first one missing: a record stored after one that was not (a publish
// lost in a reconnect, written again the patient way) is not read until
// the one before it is there, and its committers are told only then.
func (j *journal) fenceOf() jetstream.PublishOpt { return fenceOpt(j.kv, j.fence) }

// fenceOpt is the fence of a write of bucket b by the owner whose fence
// is fence (journal.fenceOf).
func fenceOpt(b *broker.SessionBucket, fence uint64) jetstream.PublishOpt {
	if b.Shared() {
		return jetstream.WithExpectLastSequenceForSubject(fence, b.Subject(ownerKey))
	}
	return jetstream.WithExpectLastSequence(fence)
}

// recordAcks receives the acknowledgements of the records the writer
// publishes, on an inbox subscription of the journal's own while it writes
// (a channel filled by the connection's reader: no goroutine, no JSON
// decoder — a successful acknowledgement is read for its sequence; anything
// else sends the record the patient way, putRecord, which reads the error),
// taken from its broker's pool and given back once the journal is flushed
// (ackinbox.go). Each publish's reply subject ends with its number, so an
// acknowledgement that comes after its batch gave up on it is told apart.
// Guarded by the journal's wmu.
type recordAcks struct {
	pool  *ackPool // where the inbox comes from and goes back to (nil: none)
	in    *ackInbox
	next  uint64 // the number of the next publish
	reply []byte // the last reply subject's bytes, kept for the next
}

// take takes an inbox on nc unless the journal has one: the numbers of
// the next publishes are its.
func (a *recordAcks) take(nc *nats.Conn) error {
	if a.in != nil {
		return nil
	}
	in, err := a.pool.get(nc)
	if err != nil {
		return err
	}
	a.in, a.next = in, in.next
	return nil
}

// publish sends m with a reply subject of its own.
func (a *recordAcks) publish(nc *nats.Conn, m *nats.Msg) error {
	if err := a.take(nc); err != nil {
		return err
	}
	a.reply = strconv.AppendUint(append(a.reply[:0], a.in.prefix...), a.next, 10)
	m.Reply = string(a.reply)
	a.next++
	a.in.next = a.next
	return nc.PublishMsg(m)
}

// wait reads acknowledgements until publish n's: its stream sequence and
// true when it was stored, false when it was refused or none came before
// timeout or the connection went down meanwhile; an error only when ctx
// ended.
func (a *recordAcks) wait(ctx context.Context, timeout <-chan time.Time, n uint64) (uint64, bool, error) {
	want := a.in.prefix + strconv.FormatUint(n, 10)
	for {
		select {
		case m := <-a.in.ch:
			if m.Subject != want {
				continue // an earlier batch's, given up on
			}
			seq, ok := pubAckSeq(m.Data)
			return seq, ok, nil
		case <-timeout:
			return 0, false, nil
		case <-a.in.status:
			return 0, false, nil
		case <-ctx.Done():
			return 0, false, ctx.Err()
		}
	}
}

// drain drops the acknowledgements that came after their batch gave up
// on them.
func (a *recordAcks) drain() {
	if a.in != nil {
		a.in.drain()
	}
}

// close gives the inbox back (the journal is flushed; a later write takes
// one again).
func (a *recordAcks) close() {
	if a.in != nil {
		a.pool.put(a.in)
		a.in = nil
	}
}

// pubAckSeq reads a JetStream publish acknowledgement,
// {"stream":"KV_x","seq":42} (perhaps with "domain" or "duplicate"): the
// sequence, and false for anything else (an error, a reply of no
// responders).
func pubAckSeq(data []byte) (uint64, bool) {
	if len(data) == 0 || bytes.Contains(data, []byte(`"error"`)) {
		return 0, false
	}
	_, rest, ok := bytes.Cut(data, []byte(`"seq":`))
	if !ok {
		return 0, false
	}
	end := 0
	for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
		end++
	}
	seq, err := strconv.ParseUint(string(rest[:end]), 10, 64)
	if err != nil || seq == 0 {
		return 0, false
	}
	return seq, true
}

// putRecord writes one record, riding through a server restart.
func (j *journal) putRecord(ctx context.Context, seq uint64, data []byte) error {
	return j.putKey(ctx, recordKey(seq), data)
}

// putKey is putRecord of any key.
func (j *journal) putKey(ctx context.Context, key string, data []byte) error {
	ctx, cancel := clock.WithTimeout(ctx, j.clk, broker.RideThrough+time.Minute)
	defer cancel()
	return j.putLocked(ctx, key, data)
}

// putLocked writes a key of the session's bucket (j.wmu held: it owns the
// fence), riding through a server restart, fenced when the session holds its lease: the write expects the
// last sequence this owner knows. When the bucket moved on, the owner's
// mark decides: still ours (an acknowledgement was lost, the write had
// happened) and the write is made again after the new last sequence; an
// other owner's and the session lost its lease.
func (j *journal) putLocked(ctx context.Context, key string, data []byte) error {
	if j.fence == 0 {
		return putKV(ctx, j.kv, key, data)
	}
	subject := j.kv.Subject(key)
	pause := 20 * time.Millisecond
	for range refencesMax {
		var ack *jetstream.PubAck
		err := broker.Retry(ctx, 5*time.Second, func(ctx context.Context) error {
			var err error
			ack, err = j.js.Publish(ctx, subject, data, j.fenceOf())
			return err
		})
		if err == nil {
			j.stored(ack.Sequence)
			return nil
		}
		if !wrongLast(err) {
			return err
		}
		if err := j.refence(ctx, reportedLast(err)); err != nil {
			return err
		}
		// Refused again right after a server restart: the stream's new
		// leader was still applying what the old one had accepted, so the
		// last sequence it reported was behind. Its mark is still this
		// owner's: wait a little and write again. The pause waits for the
		// server, so it is real time, as broker.Retry's: on the session's
		// clock, a session run on a fake clock that nothing advances (a
		// test stopping it with a write in flight) waited here forever.
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		pause = min(2*pause, time.Second)
	}
	return fmt.Errorf("%w (%d fenced writes refused in a row)", ErrLeaseLost, refencesMax)
}

// refencesMax bounds how many times in a row a fenced write refused for
// its expected last sequence is made again (this owner's mark checked
// each time): about 15 s of a stream settling after a leader change.
const refencesMax = 20

// reportedLast is the last sequence a "wrong last sequence: N" refusal
// names, 0 when it names none.
func reportedLast(err error) uint64 {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return 0
	}
	_, n, ok := strings.Cut(apiErr.Description, "wrong last sequence: ")
	if !ok {
		return 0
	}
	v, _ := strconv.ParseUint(strings.TrimSpace(n), 10, 64)
	return v
}

// refence reads the bucket's last sequence (at least seen, what a refused
// write reported) and adopts it if this owner's mark is still the bucket's
// latest; ErrLeaseLost otherwise. In the shared bucket the fence is the
// mark's own sequence (fenceOf): it is read again, and kept if the mark is
// still this owner's.
func (j *journal) refence(ctx context.Context, seen uint64) error {
	var last uint64
	err := broker.Retry(ctx, 5*time.Second, func(ctx context.Context) error {
		if j.kv.Shared() {
			return nil
		}
		st, err := j.js.Stream(ctx, j.kv.Stream())
		if err != nil {
			return err
		}
		info, err := st.Info(ctx)
		if err != nil {
			return err
		}
		last = max(info.State.LastSeq, seen)
		return nil
	})
	if err != nil {
		return err
	}
	// The mark as the bucket's leader has it (not a replica's, maybe stale).
	var mark []byte
	var rev uint64
	err = broker.Retry(ctx, 5*time.Second, func(ctx context.Context) error {
		var err error
		mark, rev, err = lastFromLeader(ctx, j.js, j.kv.Stream(), j.kv.Subject(ownerKey))
		return err
	})
	if err != nil {
		return err
	}
	o := Owner{}
	if json.Unmarshal(mark, &o) != nil || o.Token != j.token {
		return fmt.Errorf("%w (its mark is %s pid %d's)", ErrLeaseLost, o.Host, o.PID)
	}
	if j.kv.Shared() {
		j.fence = rev
		return nil
	}
	if rev > last {
		return fmt.Errorf("%w (its mark, revision %d, is past the bucket's last sequence %d)", ErrLeaseLost, rev, last)
	}
	j.fence = last
	return nil
}

// wrongLast reports whether err is a fenced write refused because the
// bucket's last sequence is not the one expected.
func wrongLast(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
	}
	return false
}

// writeSnapshotLocked writes the whole state (and mirrors it to
// checkpoint.json when the session has a run directory); j.mu and j.wmu
// held.
func (j *journal) writeSnapshotLocked(ctx context.Context) error {
	cp := j.snapshot()
	if err := j.writeSnapshot(ctx, cp); err != nil {
		return err
	}
	j.snapAt, j.snapStored = cp.Seq, cp.Seq
	return nil
}

// writeSnapshot writes a snapshot taken of the state; j.wmu held.
func (j *journal) writeSnapshot(ctx context.Context, cp *Checkpoint) error {
	data, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	if err := j.putLocked(ctx, latestKey, data); err != nil {
		return fmt.Errorf("checkpoint store: %w", err)
	}
	if j.dir == "" {
		return nil
	}
	// The run directory's copy is not synced: the store holds the
	// session's record (a resume reads it there), and the embedded store
	// leaves syncing its own files to the system as well (nats-server's
	// sync interval). The rename still leaves a whole file after a crash
	// of the process. Syncing it was 4.7 ms of `run hello.dot`'s end.
	pretty, _ := json.MarshalIndent(cp, "", "  ")
	return writeFileAtomic(j.dir+"/checkpoint.json", pretty, false)
}

// putKV writes a key, riding through a server restart.
func putKV(ctx context.Context, kv *broker.SessionBucket, key string, data []byte) error {
	return broker.Retry(ctx, 5*time.Second, func(ctx context.Context) error {
		_, err := kv.Put(ctx, key, data)
		return err
	})
}

// applyRecord replays one record.
func (j *journal) applyRecord(rec *pb.JournalRecord) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if rec.GetSeq() != j.seq+1 {
		return fmt.Errorf("session: journal record %d follows %d", rec.GetSeq(), j.seq)
	}
	j.addLocked(rec.GetAdded())
	if rec.GetNode() != "" {
		c := &actors.Commit{Node: rec.GetNode(), Firing: rec.GetFiring(), Status: rec.GetStatus(), Reason: rec.GetReason(),
			Consumed: rec.GetConsumed(), Seqs: rec.GetConsumedSeqs(), Floor: rec.GetFloor(),
			Produced: rec.GetProduced(), Context: rec.GetContext(), Base: rec.GetContextBase(), Usage: rec.GetUsage()}
		if rec.GetTerminalStatus() != "" {
			c.Terminal = &actors.Terminal{Status: rec.GetTerminalStatus(), Reason: rec.GetTerminalReason(), Final: rec.GetTerminalFinal()}
		}
		j.apply(c)
	}
	if st := rec.GetSched(); st != nil {
		j.mergeSched(snapshotOf(st))
	} else if len(rec.GetScheduler()) > 0 {
		// A record of an earlier version: the counters as JSON.
		snap := &scheduler.Snapshot{}
		if err := json.Unmarshal(rec.GetScheduler(), snap); err == nil {
			j.mergeSched(snap)
		}
	}
	j.seq = rec.GetSeq()
	j.at = rec.GetTime().AsTime()
	return nil
}

// ErrNoCheckpoint is returned for a session that has no durable state.
var ErrNoCheckpoint = errors.New("session: no checkpoint")

// ErrNotRecorded is returned for a session whose start was interrupted
// before it was recorded (its store holds no record of it): it cannot be
// resumed, and starting it again under its id is the way on. It wraps
// ErrNoCheckpoint.
var ErrNotRecorded = fmt.Errorf("%w: nothing was recorded (its start was interrupted)", ErrNoCheckpoint)

// records are the records of a journal entry, in order: the entry's own
// and those written with it (its batch).
func records(entry *pb.JournalRecord) []*pb.JournalRecord {
	if len(entry.Batch) == 0 {
		return []*pb.JournalRecord{entry}
	}
	out := make([]*pb.JournalRecord, 0, 1+len(entry.Batch))
	out = append(out, entry)
	out = append(out, entry.Batch...)
	entry.Batch = nil
	return out
}

// readRecord reads the journal entry whose first record is seq; nil when
// there is none.
func readRecord(ctx context.Context, kv kvGetter, seq uint64) (*pb.JournalRecord, error) {
	e, err := kv.Get(ctx, recordKey(seq))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	rec := &pb.JournalRecord{}
	if err := rec.UnmarshalVT(e.Value()); err != nil {
		return nil, fmt.Errorf("session: journal record %d: %w", seq, err)
	}
	return rec, nil
}

// kvGetter reads a session's entries: its bucket, or its Record (the
// bucket, or the archive of a completed session).
type kvGetter interface {
	Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error)
}

// openKV opens an existing session's entries: its bucket, or its archive
// once it completed (broker.ArchiveSession).
func openKV(ctx context.Context, b *broker.Broker, session string) (*broker.Record, error) {
	r, err := broker.OpenRecord(ctx, b.JetStream(), session)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("%w for session %s (is it durable, on this --data or --nats?)", ErrNoCheckpoint, session)
	}
	return r, err
}

// LoadCheckpoint rebuilds a durable session's state from its KV bucket:
// after its last record, or (upTo > 0) after record upTo.
func LoadCheckpoint(ctx context.Context, b *broker.Broker, session string, upTo uint64) (*Checkpoint, error) {
	kv, err := openKV(ctx, b, session)
	if err != nil {
		return nil, err
	}
	// A session exists once it recorded itself (its last step of creation);
	// anything else in its bucket is what an interrupted start left.
	meta, err := ReadMeta(ctx, b, session)
	if err != nil {
		return nil, err
	}
	j := newJournal("", session, "", clock.Real())
	j.offline = true
	if e, err := kv.Get(ctx, latestKey); err == nil {
		cp := &Checkpoint{}
		if err := json.Unmarshal(e.Value(), cp); err != nil {
			return nil, fmt.Errorf("session: snapshot of %s: %w", session, err)
		}
		if upTo == 0 || cp.Seq <= upTo {
			if _, err := j.restore(cp); err != nil {
				return nil, err
			}
			j.graph = cp.Graph
		}
	} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, err
	}
	if upTo > 0 && j.seq < upTo {
		// A checkpoint before the snapshot: its records must still be kept.
		if first, err := firstRecord(ctx, b.JetStream(), kv); err == nil && first > j.seq+1 {
			return nil, fmt.Errorf("session %s: checkpoint %d is no longer kept: the journal keeps only its last records (from %d)",
				session, upTo, first)
		}
	}
	for upTo == 0 || j.seq < upTo {
		rec, err := readRecord(ctx, kv, j.seq+1)
		if err != nil {
			return nil, err
		}
		if rec == nil {
			break
		}
		for _, r := range records(rec) {
			if upTo > 0 && r.GetSeq() > upTo {
				break
			}
			if err := j.applyRecord(r); err != nil {
				return nil, err
			}
		}
	}
	if upTo > 0 && j.seq < upTo {
		return nil, fmt.Errorf("session %s has no checkpoint %d (the last is %d)", session, upTo, j.seq)
	}
	cp := j.snapshot()
	if cp.Graph == "" {
		cp.Graph = meta.Graph
	}
	return cp, nil
}

// HistoryEntry is one checkpoint of a durable session's history.
type HistoryEntry struct {
	Seq      uint64    `json:"seq"`
	Time     time.Time `json:"time"`
	Node     string    `json:"node,omitempty"`
	Firing   uint64    `json:"firing,omitempty"`
	Status   string    `json:"status,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	Consumed int       `json:"consumed"`
	Produced int       `json:"produced"`
	// ConsumedIDs and ProducedIDs name those envelopes.
	ConsumedIDs []string `json:"consumed_ids,omitempty"`
	ProducedIDs []string `json:"produced_ids,omitempty"`
	// Terminal is the run's or the token's end recorded there, if any.
	Terminal string `json:"terminal,omitempty"`
}

// History lists a durable session's checkpoints, oldest first.
func History(ctx context.Context, b *broker.Broker, session string) ([]HistoryEntry, error) {
	kv, err := openKV(ctx, b, session)
	if err != nil {
		return nil, err
	}
	first := uint64(1)
	if m, err := ReadMeta(ctx, b, session); err == nil && m.ForkOf != "" {
		first = m.ForkAt + 1 // a fork's history starts after its snapshot
	}
	if kept, err := firstRecord(ctx, b.JetStream(), kv); err == nil && kept > first {
		first = kept // older records were compacted (JournalKeep)
	}
	var out []HistoryEntry
	for seq := first; ; {
		entry, err := readRecord(ctx, kv, seq)
		if err != nil {
			return nil, err
		}
		if entry == nil {
			break
		}
		recs := records(entry)
		seq = recs[len(recs)-1].GetSeq() + 1
		for _, rec := range recs {
			h := HistoryEntry{Seq: rec.GetSeq(), Time: rec.GetTime().AsTime(), Node: rec.GetNode(), Firing: rec.GetFiring(),
				Status: rec.GetStatus(), Reason: rec.GetReason(), Consumed: len(rec.GetConsumed()),
				Produced: len(rec.GetProduced()) + len(rec.GetAdded()), ConsumedIDs: rec.GetConsumed()}
			for _, e := range append(rec.GetProduced(), rec.GetAdded()...) {
				h.ProducedIDs = append(h.ProducedIDs, e.GetId())
			}
			if rec.GetTerminalStatus() != "" {
				h.Terminal = rec.GetTerminalStatus()
				if rec.GetTerminalFinal() {
					h.Terminal += " (run)"
				}
			}
			out = append(out, h)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w for session %s", ErrNoCheckpoint, session)
	}
	return out, nil
}

// Meta is what a durable session records about itself when it starts, so
// that it can be resumed by id alone.
type Meta struct {
	ID      string    `json:"id"`
	Graph   string    `json:"graph"`
	File    string    `json:"file,omitempty"`
	Kind    string    `json:"kind"`
	Started time.Time `json:"started"`
	// ForkOf and ForkAt name the session and checkpoint it was forked from.
	ForkOf string `json:"fork_of,omitempty"`
	ForkAt uint64 `json:"fork_at,omitempty"`
	Input  string `json:"input,omitempty"`
	// LogsDir and WorkDir are the run directory and the work directory the
	// session was started with; a resume by serve uses them again.
	LogsDir string `json:"logs_dir,omitempty"`
	WorkDir string `json:"work_dir,omitempty"`
}

// ReadMeta reads a durable session's record of itself.
func ReadMeta(ctx context.Context, b *broker.Broker, session string) (*Meta, error) {
	kv, err := openKV(ctx, b, session)
	if err != nil {
		return nil, err
	}
	e, err := kv.Get(ctx, metaKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w: session %s", ErrNotRecorded, session)
	}
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", session, err)
	}
	m := &Meta{}
	return m, json.Unmarshal(e.Value(), m)
}

// ReadGraph returns the DOT source a durable session runs.
func ReadGraph(ctx context.Context, b *broker.Broker, session string) ([]byte, error) {
	kv, err := openKV(ctx, b, session)
	if err != nil {
		return nil, err
	}
	e, err := kv.Get(ctx, graphKey)
	if err != nil {
		return nil, fmt.Errorf("session %s: graph: %w", session, err)
	}
	return e.Value(), nil
}

// forked starts a fork's bucket: its graph, a snapshot of the state it
// starts from (its history begins after it), and last its record of
// itself, which makes it exist.
func (j *journal) forked(ctx context.Context, m *Meta, dot string) error {
	j.wmu.Lock()
	defer j.wmu.Unlock()
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.putLocked(ctx, graphKey, []byte(dot)); err != nil {
		return fmt.Errorf("session: fork: %w", err)
	}
	if err := j.writeSnapshotLocked(ctx); err != nil {
		return fmt.Errorf("session: fork: %w", err)
	}
	data, _ := json.Marshal(m)
	if err := j.putLocked(ctx, metaKey, data); err != nil {
		return fmt.Errorf("session: fork: %w", err)
	}
	return nil
}

// recordGraph records a new durable session's graph.
func (j *journal) recordGraph(ctx context.Context, g *graph.Graph) error {
	if j.kv == nil {
		return nil
	}
	j.wmu.Lock()
	defer j.wmu.Unlock()
	if err := j.putLocked(ctx, graphKey, []byte(dotOf(g))); err != nil {
		return fmt.Errorf("session: checkpoint store: %w", err)
	}
	return nil
}

// dotKey is the key of a graph's DOT text (dotOf).
type dotKey struct{}

// dotOf is g.DOT(), rendered once per graph (graph.Graph.Derive): every
// durable session records its graph's text at its start.
func dotOf(g *graph.Graph) string {
	return g.Derive(dotKey{}, func(g *graph.Graph) any { return g.DOT() }).(string)
}

// sendStart is recordStart's first half for a durable pipeline's
// creation (earlyStart): its entries are sent, and j.wmu stays held until
// finishStart reads their acknowledgements.
func (j *journal) sendStart(ctx context.Context, g *graph.Graph, input *pb.Envelope, m *Meta) *taken {
	j.wmu.Lock()
	t := j.takeStart(ctx, g, input, m)
	if es, err := entries(t.recs); err == nil { // one that does not marshal fails in finishStart
		t.entries = es
		all := t.window(es)
		t.sent = j.sendWindow(all[:min(len(all), ackWindow)])
	}
	return t
}

// finishStart reads the acknowledgements of a creation sendStart sent,
// writes the rest, and lets go of j.wmu.
func (j *journal) finishStart(t *taken) error {
	defer j.wmu.Unlock()
	if err := j.writeBatch(t); err != nil {
		return fmt.Errorf("session: checkpoint store: %w", err)
	}
	return nil
}

// takeStart takes the creation's batch (j.wmu held): the input's record
// when there is an input, the graph before and the meta after.
func (j *journal) takeStart(ctx context.Context, g *graph.Graph, input *pb.Envelope, m *Meta) *taken {
	j.mu.Lock()
	if input != nil {
		envs := []*pb.Envelope{input}
		j.addLocked(envs)
		j.appendRecordLocked(ctx, nil, envs, false, nil)
	}
	t := &taken{ctx: ctx}
	if len(j.batch) > 0 {
		t = j.takeLocked(ctx)
	}
	j.mu.Unlock()
	data, _ := json.Marshal(m)
	t.pre = []entry{{key: graphKey, data: []byte(dotOf(g)), point: "create-graph"}}
	t.post = []entry{{key: metaKey, data: data}}
	if input != nil {
		t.point = "create-input"
	}
	return t
}

// recordStart records a new durable session in the order that makes its
// creation atomic — its graph, its input (the first journal record, when
// it has one: a pipeline's), and last its record of itself, which makes
// it exist — in one round trip: the three are published together, each
// expecting the last sequence the one before it makes (the journal's
// fence), so the store takes none after one it refused, and what was
// refused or not answered is written again the patient way, in order
// (writeWindow). Kill points create-graph and create-input are reached
// once each is sent. Not durable: the input is saved (add).
func (j *journal) recordStart(ctx context.Context, g *graph.Graph, input *pb.Envelope, m *Meta) error {
	if j.kv == nil {
		if input == nil {
			return nil
		}
		return j.add(input)
	}
	j.wmu.Lock()
	defer j.wmu.Unlock()
	t := j.takeStart(ctx, g, input, m)
	if err := j.writeBatch(t); err != nil {
		return fmt.Errorf("session: checkpoint store: %w", err)
	}
	return nil
}
