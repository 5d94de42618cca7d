package broker

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard/switchyard/internal/crash"
)

// The archive keeps what completed sessions leave: their records (the
// entries of their KV bucket) and their artifacts (the objects of their
// object store), for every completed session of the store, in one KV
// bucket and one object store — two streams whatever the number of
// sessions. A session's bucket and object store are two streams of their
// own, and nats-server recovers every stream of its store before it
// serves: each costs every later start of an embedded server about half a
// millisecond, so a store keeping a week of completed runs made every
// command slower. ArchiveSession moves a completed session there;
// OpenRecord reads a session's entries wherever they are; RestoreSession
// gives an archived session its bucket back (a resume); DeleteSession
// removes both.
//
// Layout: the bucket sy_archive holds a session's entries packed together,
// in the order the session wrote them (packEntries), under <session>.kv.0
// (and .1, .2… when they outgrow partSize: the first part's header
// Switchyard-Parts says how many), the names of its archived objects under
// <session>.objects (a JSON list), and, written last, <session>.archived
// (the mark: a summary its caller made of the entries, which
// ArchivedSessions returns without reading anything else): a session's
// archive is complete once the mark is there. Packed, a completed session
// is two or three messages of the archive's stream: nats-server's start
// costs about 2 µs per message it recovers (9,000 small messages 24 ms,
// 2,000 of the same bytes in all 12 ms, here), and a session's bucket
// holds a dozen. The object store sy_archive holds its objects under
// <session>/<name>.
const ArchiveName = "sy_archive"

// archiveKeys is the key prefix of session's entries in the archive.
func archiveKeys(session string) string { return session + ".kv." }

// archivedMark and archivedObjects are a session's keys in the archive
// beside its entries.
func archivedMark(session string) string    { return session + ".archived" }
func archivedObjects(session string) string { return session + ".objects" }

// archivedObject is the name of a session's object in the archive's
// object store.
func archivedObject(session, name string) string { return session + "/" + name }

// Record reads the entries of a session's KV bucket: from the bucket
// itself, or, once the session is archived, from the archive (read whole
// when it is opened).
type Record struct {
	kv *SessionBucket
	// Archived says the entries are read from the archive: entries, in
	// the order they were written.
	Archived bool
	entries  []archivedEntry
}

type archivedEntry struct {
	key   string
	value []byte
}

// Get returns the latest value of key.
func (r *Record) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	if !r.Archived {
		return r.kv.Get(ctx, key)
	}
	for i := range r.entries {
		if r.entries[i].key == key {
			return &r.entries[i], nil
		}
	}
	return nil, jetstream.ErrKeyNotFound
}

// First is the oldest key written that starts with prefix ("" when
// there is none).
func (r *Record) First(ctx context.Context, js jetstream.JetStream, prefix string) (string, error) {
	if r.Archived {
		for _, e := range r.entries {
			if strings.HasPrefix(e.key, prefix) {
				return e.key, nil
			}
		}
		return "", nil
	}
	s, err := js.Stream(ctx, r.kv.Stream())
	if err != nil {
		return "", err
	}
	subj := r.kv.Subject("")
	m, err := s.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(subj+prefix+">"))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return strings.TrimPrefix(m.Subject, subj), nil
}

// An archived entry is a jetstream.KeyValueEntry.
func (e *archivedEntry) Bucket() string                  { return ArchiveName }
func (e *archivedEntry) Key() string                     { return e.key }
func (e *archivedEntry) Value() []byte                   { return e.value }
func (e *archivedEntry) Revision() uint64                { return 0 }
func (e *archivedEntry) Created() time.Time              { return time.Time{} }
func (e *archivedEntry) Delta() uint64                   { return 0 }
func (e *archivedEntry) Operation() jetstream.KeyValueOp { return jetstream.KeyValuePut }

// OpenRecord opens the entries of session: its bucket when it has one (of
// its own, or its keys in the shared bucket), else its archive. A session
// that has none of them is jetstream.ErrBucketNotFound.
func OpenRecord(ctx context.Context, js jetstream.JetStream, session string) (*Record, error) {
	if err := checkSession(session); err != nil {
		return nil, err
	}
	kv, err := js.KeyValue(ctx, KVName(session))
	if err == nil {
		return &Record{kv: OwnBucket(kv)}, nil
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, err
	}
	if b, err := findShared(ctx, js, session); err != nil {
		return nil, err
	} else if b != nil {
		return &Record{kv: b}, nil
	}
	s, err := js.Stream(ctx, "KV_"+ArchiveName)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, jetstream.ErrBucketNotFound
	}
	if err != nil {
		return nil, err
	}
	if _, err := s.GetLastMsgForSubject(ctx, "$KV."+ArchiveName+"."+archivedMark(session)); errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, jetstream.ErrBucketNotFound
	} else if err != nil {
		return nil, err
	}
	entries, err := readPacked(ctx, s, session)
	if err != nil {
		return nil, fmt.Errorf("broker: archive of %s: %w", session, err)
	}
	return &Record{Archived: true, entries: entries}, nil
}

// partSize bounds a part of a session's packed entries (the server's
// max_payload is 1 MiB by default).
const partSize = 512 << 10

// packEntries packs entries, in order: for each, its key's length and its
// key, its value's length and its value (unsigned varints).
func packEntries(entries []archivedEntry) []byte {
	n := 0
	for _, e := range entries {
		n += 2*binary.MaxVarintLen64 + len(e.key) + len(e.value)
	}
	b := make([]byte, 0, n)
	for _, e := range entries {
		b = binary.AppendUvarint(b, uint64(len(e.key)))
		b = append(b, e.key...)
		b = binary.AppendUvarint(b, uint64(len(e.value)))
		b = append(b, e.value...)
	}
	return b
}

func unpackEntries(b []byte) ([]archivedEntry, error) {
	var out []archivedEntry
	next := func() ([]byte, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return nil, false
		}
		v := b[k : k+int(n)]
		b = b[k+int(n):]
		return v, true
	}
	for len(b) > 0 {
		key, ok := next()
		if !ok {
			return nil, errors.New("packed entries cut short")
		}
		val, ok := next()
		if !ok {
			return nil, errors.New("packed entries cut short")
		}
		out = append(out, archivedEntry{key: string(key), value: val})
	}
	return out, nil
}

// partSubject is the subject of part i of session's packed entries.
func partSubject(session string, i int) string {
	return "$KV." + ArchiveName + "." + archiveKeys(session) + strconv.Itoa(i)
}

// packedMsgs are the messages of session's packed entries: its parts, the
// first saying how many there are.
func packedMsgs(session string, entries []archivedEntry) []*nats.Msg {
	data := packEntries(entries)
	var msgs []*nats.Msg
	for i := 0; i == 0 || i*partSize < len(data); i++ {
		m := nats.NewMsg(partSubject(session, i))
		m.Data = data[i*partSize : min((i+1)*partSize, len(data))]
		msgs = append(msgs, m)
	}
	msgs[0].Header.Set(partsHeader, strconv.Itoa(len(msgs)))
	return msgs
}

const partsHeader = "Switchyard-Parts"

// readPacked reads session's packed entries from the archive's stream s.
func readPacked(ctx context.Context, s jetstream.Stream, session string) ([]archivedEntry, error) {
	first, err := s.GetLastMsgForSubject(ctx, partSubject(session, 0))
	if err != nil {
		return nil, err
	}
	parts, err := strconv.Atoi(first.Header.Get(partsHeader))
	if err != nil || parts < 1 {
		return nil, fmt.Errorf("its first part says %q parts", first.Header.Get(partsHeader))
	}
	data := first.Data
	for i := 1; i < parts; i++ {
		m, err := s.GetLastMsgForSubject(ctx, partSubject(session, i))
		if err != nil {
			return nil, fmt.Errorf("part %d: %w", i, err)
		}
		data = append(data, m.Data...)
	}
	return unpackEntries(data)
}

// Archived reports whether session is archived (its archive complete).
func Archived(ctx context.Context, js jetstream.JetStream, session string) (bool, error) {
	s, err := archiveStream(ctx, js)
	if s == nil || err != nil {
		return false, err
	}
	return archivedIn(ctx, s, session)
}

// archiveStream is the archive bucket's stream, nil when the store has no
// archive.
func archiveStream(ctx context.Context, js jetstream.JetStream) (jetstream.Stream, error) {
	s, err := js.Stream(ctx, "KV_"+ArchiveName)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	return s, err
}

// archivedIn reports whether the archive's stream s holds session's mark.
func archivedIn(ctx context.Context, s jetstream.Stream, session string) (bool, error) {
	_, err := s.GetLastMsgForSubject(ctx, "$KV."+ArchiveName+"."+archivedMark(session))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil
	}
	return err == nil, err
}

// ArchivedSession is an archived session: its id and the summary its
// archiving wrote in its mark (ArchiveSession's summary).
type ArchivedSession struct {
	ID      string
	Summary []byte
}

// ArchivedSessions lists the archived sessions of the store with their
// summaries, read through one ordered consumer over the marks.
func ArchivedSessions(ctx context.Context, js jetstream.JetStream) ([]ArchivedSession, error) {
	st, err := js.Stream(ctx, "KV_"+ArchiveName)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("broker: archive: %w", err)
	}
	prefix := "$KV." + ArchiveName + "."
	var out []ArchivedSession
	err = lastPerSubject(ctx, st, prefix+"*.archived", func(m jetstream.Msg) error {
		if op := m.Headers().Get("KV-Operation"); op == "DEL" || op == "PURGE" {
			return nil
		}
		id := strings.TrimSuffix(strings.TrimPrefix(m.Subject(), prefix), ".archived")
		if ValidToken(id) {
			out = append(out, ArchivedSession{ID: id, Summary: m.Data()})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("broker: archive: %w", err)
	}
	slices.SortFunc(out, func(a, b ArchivedSession) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// ensureArchive makes the archive's bucket and object store where the
// store has none, or has them with fewer than replicas copies; kvs and objs
// are what the lookups found (nil: none). It returns the archive bucket's
// stream. The two are made at once.
func ensureArchive(ctx context.Context, js jetstream.JetStream, st Storage, replicas int, kvs, objs jetstream.Stream) (jetstream.Stream, error) {
	o := options{replicas: replicas}
	enough := func(s jetstream.Stream) bool { return s != nil && s.CachedInfo().Config.Replicas >= replicas }
	err := parallel(func() error {
		if enough(kvs) {
			return nil
		}
		_, err := placed(ctx, func() (jetstream.KeyValue, error) {
			return js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
				Bucket: ArchiveName, Description: "switchyard: the records of completed sessions",
				Storage: st.js(), History: 1, Replicas: o.replicasFor(ctx, js, "KV_"+ArchiveName),
			})
		})
		if err == nil {
			kvs, err = js.Stream(ctx, "KV_"+ArchiveName)
		}
		return err
	}, func() error {
		if enough(objs) {
			return nil
		}
		_, err := placed(ctx, func() (jetstream.ObjectStore, error) {
			return js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
				Bucket: ArchiveName, Description: "switchyard: the artifacts of completed sessions",
				Storage: st.js(), Replicas: o.replicasFor(ctx, js, "OBJ_"+ArchiveName),
			})
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("broker: archive: %w", err)
	}
	return kvs, nil
}

// lookUp returns the streams named, nil for those that do not exist,
// looked up at once.
func lookUp(ctx context.Context, js jetstream.JetStream, names ...string) ([]jetstream.Stream, error) {
	out := make([]jetstream.Stream, len(names))
	fs := make([]func() error, len(names))
	for i, name := range names {
		fs[i] = func() error {
			s, err := js.Stream(ctx, name)
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				return nil
			}
			out[i] = s
			return err
		}
	}
	return out, parallel(fs...)
}

// ArchiveSession moves a completed session's bucket and object store into
// the archive and deletes them. A session without a bucket (archived
// already, or never durable) is left as it is. It is safe to call again
// after it was interrupted: until the archive's mark is written the
// session's bucket is intact and is what readers read; after, the archive
// is complete, and a second call writes the same entries again.
//
// The caller makes sure nothing writes the session's bucket meanwhile (it
// holds the session's lease, or nobody does and the session is over).
// summary, when not nil, makes the mark's value from the entries copied
// (key → value), for ArchivedSessions.
//
// A completed run pays for it in round trips to the server, overlapped
// where they can be: the four streams looked up at once; the entries and
// the objects read each through one ordered consumer, side by side, every
// copy published at once and acknowledged together; the mark; the two
// deletions at once. The first archive of a store makes the archive too.
func ArchiveSession(ctx context.Context, js jetstream.JetStream, session string, st Storage, summary func(entries map[string][]byte) []byte) error {
	if err := checkSession(session); err != nil {
		return err
	}
	found, err := lookUp(ctx, js, "KV_"+KVName(session), "OBJ_"+ObjectsName(session), "KV_"+ArchiveName, "OBJ_"+ArchiveName)
	if err != nil {
		return fmt.Errorf("broker: archive %s: %w", session, err)
	}
	src, objSrc := found[0], found[1]
	// The entries: the session's bucket, or its keys in the shared one.
	prefix := "$KV." + KVName(session) + "."
	shared := false
	if src == nil {
		b, err := findShared(ctx, js, session)
		if err != nil {
			return fmt.Errorf("broker: archive %s: %w", session, err)
		}
		if b == nil {
			return nil
		}
		if src, err = js.Stream(ctx, b.Stream()); err != nil {
			return fmt.Errorf("broker: archive %s: %w", session, err)
		}
		prefix, shared = b.Subject(""), true
	}
	akv, err := ensureArchive(ctx, js, st, src.CachedInfo().Config.Replicas, found[2], found[3])
	if err != nil {
		return err
	}
	var (
		mu      sync.Mutex
		acks    []jetstream.PubAckFuture
		entries []archivedEntry
	)
	publish := func(m *nats.Msg) error {
		f, err := js.PublishMsgAsync(m)
		if err != nil {
			return err
		}
		mu.Lock()
		acks = append(acks, f)
		mu.Unlock()
		return nil
	}
	err = parallel(func() error {
		// The entries, in the order the session wrote them.
		return lastPerSubject(ctx, src, prefix+">", func(m jetstream.Msg) error {
			if op := m.Headers().Get("KV-Operation"); op == "DEL" || op == "PURGE" {
				return nil
			}
			entries = append(entries, archivedEntry{key: strings.TrimPrefix(m.Subject(), prefix), value: m.Data()})
			return nil
		})
	}, func() error {
		return archiveObjects(ctx, js, objSrc, akv, session, publish)
	})
	// (A part beyond those of an earlier, interrupted archiving of the
	// session, which had more, stays unread until the session is deleted:
	// the first part says how many there are.)
	for _, m := range packedMsgs(session, entries) {
		if err != nil {
			break
		}
		err = publish(m)
	}
	if err == nil {
		err = waitAcks(ctx, acks)
	}
	if err != nil {
		return fmt.Errorf("broker: archive %s: %w", session, err)
	}
	crash.Point("archive-copied") // copied, not marked: the bucket is the record
	var mark []byte
	if summary != nil {
		byKey := make(map[string][]byte, len(entries))
		for _, e := range entries {
			byKey[e.key] = e.value
		}
		mark = summary(byKey)
	}
	if _, err := js.Publish(ctx, "$KV."+ArchiveName+"."+archivedMark(session), mark); err != nil {
		return fmt.Errorf("broker: archive %s: %w", session, err)
	}
	crash.Point("archive-marked") // both are complete: the bucket is read first
	// The session's own resources go once the archive is complete.
	return parallel(func() error {
		if shared {
			if err := purgeShared(ctx, js, session, nil, true); err != nil {
				return fmt.Errorf("broker: archive %s: purge its keys of bucket %s: %w", session, SharedName, err)
			}
			return nil
		}
		if err := js.DeleteKeyValue(ctx, KVName(session)); err != nil && !notFound(err) {
			return fmt.Errorf("broker: archive %s: delete bucket: %w", session, err)
		}
		return nil
	}, func() error {
		if objSrc == nil {
			return nil
		}
		if err := js.DeleteObjectStore(ctx, ObjectsName(session)); err != nil && !notFound(err) {
			return fmt.Errorf("broker: archive %s: delete object store: %w", session, err)
		}
		return nil
	})
}

// lastPerSubject calls f with the last message of every subject of s that
// matches filter, in stream order, read through one ordered consumer.
func lastPerSubject(ctx context.Context, s jetstream.Stream, filter string, f func(jetstream.Msg) error) error {
	if s.CachedInfo().State.Msgs == 0 {
		return nil
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy,
	})
	if err != nil {
		return err
	}
	for {
		batch, err := cons.FetchNoWait(256)
		if err != nil {
			return err
		}
		got, last := 0, false
		for m := range batch.Messages() {
			got++
			if err := f(m); err != nil {
				return err
			}
			if md, err := m.Metadata(); err == nil && md.NumPending == 0 {
				last = true
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return err
		}
		if last || got == 0 {
			return nil
		}
	}
}

func waitAcks(ctx context.Context, acks []jetstream.PubAckFuture) error {
	for _, f := range acks {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// archiveObjects copies session's objects, from its object store's stream
// src (nil: it has none), into the archive's object store, publishing them
// with publish, and records their names with those archived before (when
// the session was archived, restored and completed again) in the archive
// bucket, whose stream is akv.
func archiveObjects(ctx context.Context, js jetstream.JetStream, src, akv jetstream.Stream, session string, publish func(*nats.Msg) error) error {
	if src == nil {
		return nil
	}
	bucket := ObjectsName(session)
	var names []string
	err := lastPerSubject(ctx, src, "$O."+bucket+".M.>", func(m jetstream.Msg) error {
		var info jetstream.ObjectInfo
		if err := json.Unmarshal(m.Data(), &info); err != nil {
			return fmt.Errorf("object description %s: %w", m.Subject(), err)
		}
		if info.Deleted {
			return nil
		}
		data, err := readObject(ctx, js, src, &info)
		if err != nil {
			return fmt.Errorf("object %s: %w", info.Name, err)
		}
		names = append(names, info.Name)
		_, err = objectMsgs(ArchiveName, archivedObject(session, info.Name), info.Description, data, publish)
		return err
	})
	if err != nil || len(names) == 0 {
		return err
	}
	listSubj := "$KV." + ArchiveName + "." + archivedObjects(session)
	if m, err := akv.GetLastMsgForSubject(ctx, listSubj); err == nil {
		var before []string
		if json.Unmarshal(m.Data, &before) == nil {
			names = append(names, before...)
		}
	} else if !errors.Is(err, jetstream.ErrMsgNotFound) {
		return err
	}
	slices.Sort(names)
	data, _ := json.Marshal(slices.Compact(names))
	return publish(&nats.Msg{Subject: listSubj, Data: data})
}

// readObject reads an object's bytes from its store's stream s: a
// one-chunk object (the artifacts of agents are mostly small) with one
// direct read of its chunk, a larger one through the object store's
// reader.
func readObject(ctx context.Context, js jetstream.JetStream, s jetstream.Stream, info *jetstream.ObjectInfo) ([]byte, error) {
	switch info.Chunks {
	case 0:
		return nil, nil
	case 1:
		m, err := s.GetLastMsgForSubject(ctx, "$O."+info.Bucket+".C."+info.NUID)
		if err != nil {
			return nil, err
		}
		return m.Data, nil
	}
	obj, err := js.ObjectStore(ctx, info.Bucket)
	if err != nil {
		return nil, err
	}
	r, err := obj.Get(ctx, info.Name)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// RestoreSession gives an archived session its bucket back, made with
// opts as SessionKV makes it, with the entries it had when it was
// archived, and takes them out of the archive (its objects stay there,
// where GetArtifact finds them). It does nothing for a session that is
// not archived. The caller holds the session's lease.
func RestoreSession(ctx context.Context, js jetstream.JetStream, session string, st Storage, opts ...Option) error {
	if ok, err := Archived(ctx, js, session); err != nil || !ok {
		return err // nil: not archived
	}
	s, err := js.Stream(ctx, "KV_"+ArchiveName)
	if err != nil {
		return fmt.Errorf("broker: restore %s: %w", session, err)
	}
	entries, err := readPacked(ctx, s, session)
	if err != nil {
		return fmt.Errorf("broker: restore %s: %w", session, err)
	}
	kv, err := SessionKV(ctx, js, session, st, opts...)
	if err != nil {
		return err
	}
	acks := make([]jetstream.PubAckFuture, 0, len(entries))
	for _, e := range entries {
		f, err := js.PublishAsync(kv.Subject(e.key), e.value)
		if err != nil {
			return fmt.Errorf("broker: restore %s: %w", session, err)
		}
		acks = append(acks, f)
	}
	if err := waitAcks(ctx, acks); err != nil {
		return fmt.Errorf("broker: restore %s: %w", session, err)
	}
	// The mark first: from then on the bucket is the session's record.
	// (Purged from the stream, not the bucket: a KV purge leaves a marker
	// on the subject, which ArchivedSessions would count.)
	for _, subj := range []string{archivedMark(session), archiveKeys(session) + ">"} {
		if err := s.Purge(ctx, jetstream.WithPurgeSubject("$KV."+ArchiveName+"."+subj)); err != nil {
			return fmt.Errorf("broker: restore %s: %w", session, err)
		}
	}
	return nil
}

// deleteArchived removes what the archive holds of session: its entries,
// its mark and its objects.
func deleteArchived(ctx context.Context, js jetstream.JetStream, session string) error {
	s, err := js.Stream(ctx, "KV_"+ArchiveName)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	if m, err := s.GetLastMsgForSubject(ctx, "$KV."+ArchiveName+"."+archivedObjects(session)); err == nil {
		var names []string
		_ = json.Unmarshal(m.Data, &names)
		for _, name := range names {
			if err := deleteObject(ctx, js, ArchiveName, archivedObject(session, name)); err != nil {
				errs = append(errs, err)
			}
		}
	} else if !errors.Is(err, jetstream.ErrMsgNotFound) {
		errs = append(errs, err)
	}
	subjects := []string{session + ".>"}
	if len(errs) > 0 {
		// The objects' list goes with the rest only once they are gone.
		subjects = []string{archivedMark(session), archiveKeys(session) + ">"}
	}
	for _, subj := range subjects {
		if err := s.Purge(ctx, jetstream.WithPurgeSubject("$KV."+ArchiveName+"."+subj)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// archivedArtifact reads an artifact of session name from the archive.
func archivedArtifact(ctx context.Context, js jetstream.JetStream, session, name string) ([]byte, error) {
	obj, err := js.ObjectStore(ctx, ArchiveName)
	if err != nil {
		return nil, err
	}
	info, err := obj.GetInfo(ctx, archivedObject(session, name))
	if err != nil {
		return nil, err
	}
	s, err := js.Stream(ctx, "OBJ_"+ArchiveName)
	if err != nil {
		return nil, err
	}
	return readObject(ctx, js, s, info)
}

// objectSubjects are the subjects of an object of bucket: its chunks and
// its description.
func objectSubjects(bucket, nuid, name string) []string {
	return []string{"$O." + bucket + ".C." + nuid, "$O." + bucket + ".M." + base64.URLEncoding.EncodeToString([]byte(name))}
}

// parallel runs each f at once and joins their errors. The last runs on
// the caller's goroutine: a goroutine fewer to start and wait for, which
// on busy cores is a scheduling delay more than the work.
func parallel(fs ...func() error) error {
	if len(fs) == 0 {
		return nil
	}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	keep := func(err error) {
		if err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	}
	last := len(fs) - 1
	for _, f := range fs[:last] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			keep(f())
		}()
	}
	keep(fs[last]())
	wg.Wait()
	return errors.Join(errs...)
}
