package session

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard/switchyard/actors"
	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/pool"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// DefaultRetain is how long a completed durable session is kept.
const DefaultRetain = 7 * 24 * time.Hour

// Stored is a durable session the store holds.
type Stored struct {
	Meta
	Status string `json:"status"` // running, success, fail or stopped (see End)
	// Stopped is who stopped it and when (status stopped).
	Stopped *StopRecord `json:"stopped,omitempty"`
	Seq     uint64      `json:"checkpoint"`
	Last    time.Time   `json:"last"` // when its last checkpoint was written
	// Archived says its record and artifacts are in the store's archive
	// (it completed: broker.ArchiveSession).
	Archived bool `json:"archived,omitempty"`
}

// List returns the durable sessions of the store, by id.
func List(ctx context.Context, b *broker.Broker) ([]Stored, error) {
	ids, err := storedIDs(ctx, b)
	var out []Stored
	for _, id := range ids {
		if st, ok := readStored(ctx, b, id); ok {
			out = append(out, st)
		}
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return out, err
	}
	// The completed sessions moved to the archive, but for one that is
	// also still in its bucket (its archiving was interrupted).
	archived, err := broker.ArchivedSessions(ctx, b.JetStream())
	if err != nil {
		return out, err
	}
	seen := make(map[string]bool, len(out))
	for _, st := range out {
		seen[st.ID] = true
	}
	for _, a := range archived {
		if seen[a.ID] {
			continue
		}
		// What its archiving summed up of it (archiveSummary), else what
		// its record says.
		var st Stored
		if json.Unmarshal(a.Summary, &st) != nil || st.ID != a.ID || st.Status == "" {
			var ok bool
			if st, ok = readStored(ctx, b, a.ID); !ok {
				continue
			}
		}
		st.Archived = true
		out = append(out, st)
	}
	sort.Slice(out, func(i, k int) bool { return out[i].ID < out[k].ID })
	return out, nil
}

// storedIDs lists, each once, the ids of the sessions whose entries the
// store holds, recorded or not: those with a bucket of their own, then
// those with keys in the shared bucket (broker.SharedName: started on
// prepared stores, or what such a start killed early left there).
func storedIDs(ctx context.Context, b *broker.Broker) ([]string, error) {
	prefix := strings.TrimSuffix(broker.KVName("x"), "x")
	seen := map[string]bool{}
	var ids []string
	add := func(id string) {
		if !seen[id] && broker.ValidToken(id) {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	names := b.JetStream().KeyValueStoreNames(ctx)
	for name := range names.Name() {
		if id, ok := strings.CutPrefix(name, prefix); ok {
			add(id)
		}
	}
	if err := names.Error(); err != nil {
		return ids, err
	}
	shared, err := broker.SharedSessions(ctx, b.JetStream())
	for _, id := range shared {
		add(id)
	}
	return ids, err
}

// readStored reads what the store says of session id; false when it holds
// no session of that id (not a session's bucket, or one being created).
func readStored(ctx context.Context, b *broker.Broker, id string) (Stored, bool) {
	m, err := ReadMeta(ctx, b, id)
	if err != nil {
		return Stored{}, false
	}
	st := Stored{Meta: *m, Status: "running", Last: m.Started}
	if cp, err := LoadCheckpoint(ctx, b, id, 0); err == nil {
		st.Status, st.Seq = cp.Status, cp.Seq
		if !cp.Timestamp.IsZero() {
			st.Last = cp.Timestamp
		}
	}
	if st.Status == "running" {
		if r, err := ReadStopped(ctx, b, id); err == nil && r != nil {
			st.Status, st.Stopped = "stopped", r
		}
	}
	return st, true
}

// Running lists the durable sessions whose last checkpoint says they are
// running (a process died or was interrupted with them); the sessions an
// operator stopped (End) are not among them. Only the sessions with a
// bucket or a work stream in the store are read: a completed session's
// bucket moves to the archive and its work stream goes (releaseFinished),
// so the finished sessions a store keeps cost a start (serve --all,
// --takeover and each rescan) nothing. A durable pipeline on a prepared
// store has no work stream until outside input comes (actors.Config.MakeStream):
// its bucket names it.
func Running(ctx context.Context, b *broker.Broker) ([]Meta, error) {
	seen := map[string]bool{}
	var ids []string
	add := func(id string) {
		if !seen[id] && broker.ValidToken(id) && broker.ReservedSession(id) == nil {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	var errs []error
	stored, err := storedIDs(ctx, b)
	if err != nil && !errors.Is(err, context.Canceled) {
		errs = append(errs, err)
	}
	for _, id := range stored {
		add(id)
	}
	names := b.JetStream().StreamNames(ctx)
	for name := range names.Name() {
		// The pools' work stream, an event stream, another stream: not
		// a valid session's id.
		if id, ok := strings.CutPrefix(name, broker.StreamName("")); ok {
			add(id)
		}
	}
	if err := names.Err(); err != nil && !errors.Is(err, context.Canceled) {
		errs = append(errs, err)
	}
	var out []Meta
	for _, id := range ids {
		if st, ok := readStored(ctx, b, id); ok && st.Status == "running" {
			out = append(out, st.Meta)
		}
	}
	sort.Slice(out, func(i, k int) bool { return out[i].ID < out[k].ID })
	return out, errors.Join(errs...)
}

// GC removes the completed durable sessions whose last checkpoint is older
// than retain at now — their streams, KV bucket and objects — and returns
// their ids. Running sessions are never removed. dryRun only lists them.
// The finished sessions it keeps lose their durable consumer and empty
// dead-letter stream, if a store written before sessions released them at
// their end still has them (see releaseFinished).
func GC(ctx context.Context, b *broker.Broker, retain time.Duration, now time.Time, dryRun bool) ([]string, error) {
	all, err := List(ctx, b)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	if !dryRun {
		errs = append(errs, broker.AgeLeases(ctx, b.JetStream()))
	}
	for _, s := range all {
		if s.Status == "running" {
			continue
		}
		if now.Sub(s.Last) < retain {
			if !dryRun && !s.Archived {
				errs = append(errs, releaseIdle(ctx, b, s.ID, s.Status != "stopped"))
			}
			continue
		}
		if !dryRun {
			if err := broker.DeleteSession(ctx, b.JetStream(), s.ID); err != nil {
				errs = append(errs, err)
				continue
			}
			if err := pool.ForgetOutcomes(ctx, b.JetStream(), s.ID); err != nil {
				errs = append(errs, err)
			}
		}
		removed = append(removed, s.ID)
	}
	if !dryRun {
		errs = append(errs, removeUnrecorded(ctx, b))
	}
	return removed, errors.Join(errs...)
}

// removeUnrecorded removes the stores no session recorded (a bucket
// without session.meta) that no live process holds: what a start killed
// before it recorded its session left, and the store a killed process had
// prepared for its next pipeline (prepared.go). A start under way, or a
// store prepared by a live process, holds its lease and is left alone.
func removeUnrecorded(ctx context.Context, b *broker.Broker) error {
	ids, err := storedIDs(ctx, b)
	if err != nil {
		return err
	}
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		seen[id] = true
	}
	// A work stream made beside its bucket (a new session's, or a
	// prepared store's) may be all a start killed early left; an object
	// store may outlive its session, made by an upload whose envelope
	// never reached it (its owner removed its store without one:
	// broker.NoObjects). They are told from other streams by their names
	// and what they were made as (broker.SessionOfStream).
	streams := b.JetStream().ListStreams(ctx)
	for info := range streams.Info() {
		id, ok := broker.SessionOfStream(info.Config.Name, info.Config.Description)
		if ok && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	if err := streams.Err(); err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		if _, err := ReadMeta(ctx, b, id); !errors.Is(err, ErrNoCheckpoint) {
			continue // recorded (or unreadable: left alone)
		}
		var held *HeldError
		if err := RemoveUnrecorded(ctx, b, id); err != nil && !errors.As(err, &held) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// RemoveUnrecorded removes what an interrupted start of session id may
// have left in the store (its stream, a bucket without the session's
// record of itself, its lease). It takes the session's lease first, so a
// start still under way in a live process is never disturbed (a
// *HeldError), and a recorded session is never touched.
func RemoveUnrecorded(ctx context.Context, b *broker.Broker, id string) error {
	if _, err := ReadMeta(ctx, b, id); !errors.Is(err, ErrNoCheckpoint) {
		return err
	}
	l, err := acquireLease(ctx, b, id, clock.Real(), DefaultLeaseTTL, 1)
	if err != nil {
		return err
	}
	defer l.release()
	if _, err := ReadMeta(ctx, b, id); !errors.Is(err, ErrNoCheckpoint) {
		return err // recorded meanwhile
	}
	return broker.DeleteSession(ctx, b.JetStream(), id)
}

// releaseFinished deletes what finished session id no longer needs: its
// durable consumer, when it completed its work stream and the outcomes of
// its pool jobs (pool.ForgetOutcomes), and its dead-letter stream when that
// is empty; and a completed session's bucket and object store move to the
// store's archive (broker.ArchiveSession), where every reader of its record
// finds them (openKV, broker.GetArtifact). Every start and resume (--reopen, a fork) re-creates them: the
// consumer from the journal's floors, the streams anew. Each costs every
// later start of an embedded server: nats-server recovers every stream of
// its store at start (about 0.5 ms each here) and stops each durable
// consumer with a 10 ms poll of its flusher, one after the other, so a store
// keeping a week of sessions made every command slower.
func releaseFinished(ctx context.Context, b *broker.Broker, id string, completed bool) error {
	js := b.JetStream()
	err := js.DeleteConsumer(ctx, broker.StreamName(id), actors.ConsumerName)
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return err
	}
	// A completed session is never run again (a resume of it completes at
	// once, a fork has a stream of its own): its work stream — whose
	// envelopes nothing will consume — and the outcomes of its pool jobs go.
	// A stopped session may be reopened, and keeps them. A completed one's
	// record (the KV bucket) and artifacts move to the archive, kept until
	// gc removes them: two streams fewer for every later start of the
	// store's server to recover.
	if completed {
		if err := js.DeleteStream(ctx, broker.StreamName(id)); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			return err
		}
		if err := pool.ForgetOutcomes(ctx, js, id); err != nil {
			return err
		}
		if err := broker.ArchiveSession(ctx, js, id, b.Storage(), archiveSummary(id)); err != nil {
			return err
		}
	}
	dlq, err := js.Stream(ctx, broker.DeadLetterStreamName(id))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if info := dlq.CachedInfo(); info == nil || info.State.Msgs > 0 {
		return nil // its dead letters are kept for inspection
	}
	err = js.DeleteStream(ctx, broker.DeadLetterStreamName(id))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	return err
}

// releaseIdle releases finished session id (releaseFinished) unless a
// process holds it (reopened meanwhile).
func releaseIdle(ctx context.Context, b *broker.Broker, id string, completed bool) error {
	if o, err := ReadOwner(ctx, b, id, time.Now()); err != nil || o != nil {
		return err
	}
	return releaseFinished(ctx, b, id, completed)
}

// archiveSummary makes the mark of completed session id in the archive
// from its bucket's entries: the Stored that List reports of it, so that
// listing and collecting the archived sessions (gc, and run and serve at
// their start) read one consumer over the marks instead of each session's
// record. It makes none (List reads the session's record) when the entries
// do not say it all: no record of itself, no snapshot, or records after
// the last snapshot.
func archiveSummary(id string) func(entries map[string][]byte) []byte {
	return func(entries map[string][]byte) []byte {
		var m Meta
		if json.Unmarshal(entries[metaKey], &m) != nil || m.ID != id {
			return nil
		}
		var cp struct { // of the snapshot, what Stored says
			Timestamp time.Time `json:"timestamp"`
			Seq       uint64    `json:"seq"`
			Status    string    `json:"status"`
		}
		if json.Unmarshal(entries[latestKey], &cp) != nil || cp.Status == "" || cp.Status == "running" {
			return nil
		}
		var lastKey string
		for k := range entries {
			if strings.HasPrefix(k, journalPrefix) && k > lastKey {
				lastKey = k // recordKey's numbers are zero-padded
			}
		}
		if lastKey != "" {
			rec := &pb.JournalRecord{}
			if rec.UnmarshalVT(entries[lastKey]) != nil {
				return nil
			}
			if recs := records(rec); recs[len(recs)-1].GetSeq() > cp.Seq {
				return nil
			}
		}
		st := Stored{Meta: m, Status: cp.Status, Seq: cp.Seq, Last: m.Started, Archived: true}
		if !cp.Timestamp.IsZero() {
			st.Last = cp.Timestamp
		}
		data, err := json.Marshal(st)
		if err != nil {
			return nil
		}
		return data
	}
}
