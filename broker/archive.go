package broker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

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
// Layout: the bucket sy_archive holds a session's entries under
// <session>.kv.<key>, the names of its archived objects under
// <session>.objects (a JSON list), and, written last, <session>.archived
// (the mark: a summary its caller made of the entries, which
// ArchivedSessions returns without reading anything else): a session's
// archive is complete once the mark is there. The object store sy_archive holds its objects under
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
// itself, or, once the session is archived, from the archive.
type Record struct {
	kv     jetstream.KeyValue
	prefix string
	// Archived says the entries are read from the archive.
	Archived bool
}

// Get returns the latest value of key.
func (r *Record) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	return r.kv.Get(ctx, r.prefix+key)
}

// Stream is the name of the stream that holds the entries.
func (r *Record) Stream() string { return "KV_" + r.kv.Bucket() }

// Subject is the subject that holds key's values in Stream.
func (r *Record) Subject(key string) string { return "$KV." + r.kv.Bucket() + "." + r.prefix + key }

// OpenRecord opens the entries of session: its bucket when it has one,
// else its archive. A session that has neither is jetstream.ErrBucketNotFound.
func OpenRecord(ctx context.Context, js jetstream.JetStream, session string) (*Record, error) {
	if err := checkSession(session); err != nil {
		return nil, err
	}
	kv, err := js.KeyValue(ctx, KVName(session))
	if err == nil {
		return &Record{kv: kv}, nil
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, err
	}
	arch, err := js.KeyValue(ctx, ArchiveName)
	if err != nil {
		return nil, err
	}
	if _, err := arch.Get(ctx, archivedMark(session)); errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, jetstream.ErrBucketNotFound
	} else if err != nil {
		return nil, err
	}
	return &Record{kv: arch, prefix: archiveKeys(session), Archived: true}, nil
}

// Archived reports whether session is archived (its archive complete).
func Archived(ctx context.Context, js jetstream.JetStream, session string) (bool, error) {
	arch, err := js.KeyValue(ctx, ArchiveName)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	_, err = arch.Get(ctx, archivedMark(session))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
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
	if src == nil {
		return nil
	}
	akv, err := ensureArchive(ctx, js, st, src.CachedInfo().Config.Replicas, found[2], found[3])
	if err != nil {
		return err
	}
	var (
		mu      sync.Mutex
		acks    []jetstream.PubAckFuture
		entries = map[string][]byte{}
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
		prefix := "$KV." + KVName(session) + "."
		return lastPerSubject(ctx, src, prefix+">", func(m jetstream.Msg) error {
			if op := m.Headers().Get("KV-Operation"); op == "DEL" || op == "PURGE" {
				return nil
			}
			key := strings.TrimPrefix(m.Subject(), prefix)
			if summary != nil {
				entries[key] = m.Data()
			}
			return publish(&nats.Msg{Subject: "$KV." + ArchiveName + "." + archiveKeys(session) + key, Data: m.Data()})
		})
	}, func() error {
		return archiveObjects(ctx, js, objSrc, akv, session, publish)
	})
	if err == nil {
		err = waitAcks(ctx, acks)
	}
	if err != nil {
		return fmt.Errorf("broker: archive %s: %w", session, err)
	}
	crash.Point("archive-copied") // copied, not marked: the bucket is the record
	var mark []byte
	if summary != nil {
		mark = summary(entries)
	}
	if _, err := js.Publish(ctx, "$KV."+ArchiveName+"."+archivedMark(session), mark); err != nil {
		return fmt.Errorf("broker: archive %s: %w", session, err)
	}
	crash.Point("archive-marked") // both are complete: the bucket is read first
	// The session's own resources go once the archive is complete.
	return parallel(func() error {
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
		return err
	}
	akv, err := js.KeyValue(ctx, ArchiveName)
	if err != nil {
		return fmt.Errorf("broker: restore %s: %w", session, err)
	}
	w, err := akv.Watch(ctx, archiveKeys(session)+">", jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("broker: restore %s: %w", session, err)
	}
	var entries []jetstream.KeyValueEntry
	func() {
		defer func() { _ = w.Stop() }()
		for {
			select {
			case e, ok := <-w.Updates():
				if !ok {
					err = errors.New("watcher stopped")
					return
				}
				if e == nil {
					return
				}
				entries = append(entries, e)
			case <-ctx.Done():
				err = ctx.Err()
				return
			}
		}
	}()
	if err != nil {
		return fmt.Errorf("broker: restore %s: %w", session, err)
	}
	kv, err := SessionKV(ctx, js, session, st, opts...)
	if err != nil {
		return err
	}
	acks := make([]jetstream.PubAckFuture, 0, len(entries))
	for _, e := range entries {
		f, err := js.PublishAsync("$KV."+kv.Bucket()+"."+strings.TrimPrefix(e.Key(), archiveKeys(session)), e.Value())
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
	s, err := js.Stream(ctx, "KV_"+ArchiveName)
	if err != nil {
		return fmt.Errorf("broker: restore %s: %w", session, err)
	}
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
	akv, err := js.KeyValue(ctx, ArchiveName)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	if e, err := akv.Get(ctx, archivedObjects(session)); err == nil {
		var names []string
		_ = json.Unmarshal(e.Value(), &names)
		for _, name := range names {
			if err := deleteObject(ctx, js, ArchiveName, archivedObject(session, name)); err != nil {
				errs = append(errs, err)
			}
		}
	} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
		errs = append(errs, err)
	}
	s, err := js.Stream(ctx, "KV_"+ArchiveName)
	if err != nil {
		return errors.Join(append(errs, err)...)
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

// parallel runs each f at once and joins their errors.
func parallel(fs ...func() error) error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for _, f := range fs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
