package broker

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// Artifacts live in the session's object store (SessionObjects) under a
// name; an envelope refers to one as obj://<bucket>/<name> with its
// sha256, so a reader can check it got the bytes the writer meant.

// ArtifactRef is the reference of an artifact in a session's store.
func ArtifactRef(session, name string) string { return "obj://" + ObjectsName(session) + "/" + name }

// PutArtifact stores data under name (a slash-separated path) in the
// session's object store and returns the envelope's reference to it: the
// reference names the object, the artifact's name is the path's last
// element (a file name, as outside envelopes must give it too).
//
// It writes the object store's format itself (ADR-20: chunks on
// $O.<bucket>.C.<nuid>, then the description on $O.<bucket>.M.<name> with
// a subject roll-up), with acknowledged publishes, so the standard API and
// the nats CLI read it. nats.go's ObjectStore.Put publishes
// asynchronously on a JetStream context it makes for each call, and its
// reconnect watcher can be left blocked forever when the call ends first
// (a goroutine leaked per artifact, seen with nats.go v1.55.0).
func PutArtifact(ctx context.Context, js jetstream.JetStream, session, name, typ string, data []byte, st Storage) (*pb.Artifact, error) {
	bucket := ObjectsName(session)
	// The store is not looked up first (a stream info request, ~0.1 ms of
	// CPU, at every artifact): a session's first artifact finds none —
	// its first chunk's publish is refused at once, nothing stored — and
	// makes it. That first try is not retried on "no responders" (nats.go
	// waits 250 ms twice, for a stream's leader being elected): the store
	// is made, which a cluster's stream in election also answers, and the
	// object written again with the retries.
	sum, err := writeObject(ctx, js, bucket, name, typ, data, jetstream.WithRetryAttempts(0))
	if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
		if _, err := SessionObjects(ctx, js, session, st); err != nil {
			return nil, err
		}
		sum, err = writeObject(ctx, js, bucket, name, typ, data)
	}
	if err != nil {
		return nil, err
	}
	return &pb.Artifact{Type: typ, Name: path.Base(name), Ref: ArtifactRef(session, name), Sha256: hex.EncodeToString(sum),
		Size: int64(len(data))}, nil
}

// writeObject stores data as object name of bucket (an existing object
// store), described as desc, and returns its sha256.
func writeObject(ctx context.Context, js jetstream.JetStream, bucket, name, desc string, data []byte, opts ...jetstream.PublishOpt) ([]byte, error) {
	return objectMsgs(bucket, name, desc, data, func(m *nats.Msg) error {
		if _, err := js.PublishMsg(ctx, m, opts...); err != nil {
			return fmt.Errorf("broker: artifact %s: %w", name, err)
		}
		return nil
	})
}

// objectMsgs hands publish, in order, the messages that store data as
// object name of bucket in the object store's format: its chunks, then its
// description (rolling up its subject). It returns the data's sha256.
func objectMsgs(bucket, name, desc string, data []byte, publish func(*nats.Msg) error) ([]byte, error) {
	id := nuid.Next()
	chunkSubj := "$O." + bucket + ".C." + id
	h := sha256.New()
	h.Write(data)
	var chunks uint32
	for off := 0; off < len(data); off += artifactChunk {
		end := min(off+artifactChunk, len(data))
		if err := publish(&nats.Msg{Subject: chunkSubj, Data: data[off:end]}); err != nil {
			return nil, err
		}
		chunks++
	}
	sum := h.Sum(nil)
	info := jetstream.ObjectInfo{
		ObjectMeta: jetstream.ObjectMeta{Name: name, Description: desc,
			Opts: &jetstream.ObjectMetaOptions{ChunkSize: artifactChunk}},
		Bucket: bucket, NUID: id, Size: uint64(len(data)), Chunks: chunks,
		Digest: "SHA-256=" + base64.URLEncoding.EncodeToString(sum),
	}
	meta, err := json.Marshal(info)
	if err != nil {
		return nil, err
	}
	mm := nats.NewMsg("$O." + bucket + ".M." + base64.URLEncoding.EncodeToString([]byte(name)))
	mm.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	mm.Data = meta
	if err := publish(mm); err != nil {
		return nil, err
	}
	return sum, nil
}

// ArtifactNames are the names of the objects in the session's object
// store (none when it has no store). It reads the store's stream state,
// not the objects' descriptions: nats.go's ObjectStore.List waits for the
// last description it was told of, and never returns when that one is
// purged while it lists.
func ArtifactNames(ctx context.Context, js jetstream.JetStream, session string) ([]string, error) {
	bucket := ObjectsName(session)
	st, err := js.Stream(ctx, "OBJ_"+bucket)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("broker: artifacts of %s: %w", session, err)
	}
	prefix := "$O." + bucket + ".M."
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(prefix+">"))
	if err != nil {
		return nil, fmt.Errorf("broker: artifacts of %s: %w", session, err)
	}
	names := make([]string, 0, len(info.State.Subjects))
	for subj := range info.State.Subjects {
		name, err := base64.URLEncoding.DecodeString(strings.TrimPrefix(subj, prefix))
		if err == nil {
			names = append(names, string(name))
		}
	}
	sort.Strings(names)
	return names, nil
}

// DeleteArtifact removes the object name from the session's object store
// altogether: its chunks and its description are purged, leaving no
// delete marker (ObjectStore.Delete keeps one per name for good, which a
// store deleting an object per firing would accumulate). An object that
// does not exist is not an error.
func DeleteArtifact(ctx context.Context, js jetstream.JetStream, session, name string) error {
	return deleteObject(ctx, js, ObjectsName(session), name)
}

// deleteObject purges object name of bucket: its chunks and its
// description. An object that does not exist is not an error.
func deleteObject(ctx context.Context, js jetstream.JetStream, bucket, name string) error {
	obj, err := js.ObjectStore(ctx, bucket)
	if err != nil {
		return fmt.Errorf("broker: object store %s: %w", bucket, err)
	}
	info, err := obj.GetInfo(ctx, name, jetstream.GetObjectInfoShowDeleted())
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("broker: artifact %s: %w", name, err)
	}
	st, err := js.Stream(ctx, "OBJ_"+bucket)
	if err != nil {
		return fmt.Errorf("broker: artifact %s: %w", name, err)
	}
	for _, subj := range objectSubjects(bucket, info.NUID, name) {
		if err := st.Purge(ctx, jetstream.WithPurgeSubject(subj)); err != nil {
			return fmt.Errorf("broker: delete artifact %s: %w", name, err)
		}
	}
	return nil
}

// artifactChunk is the size of an artifact's chunks (the object store's
// default).
const artifactChunk = 128 << 10

// ErrArtifactMismatch is returned when an artifact's bytes do not have the
// sha256 its reference names.
var ErrArtifactMismatch = errors.New("broker: artifact does not match its sha256")

// GetArtifact reads the artifact a reference names (obj://bucket/name) and
// checks its sha256.
func GetArtifact(ctx context.Context, js jetstream.JetStream, a *pb.Artifact) ([]byte, error) {
	rest, ok := strings.CutPrefix(a.GetRef(), "obj://")
	if !ok {
		return nil, fmt.Errorf("broker: artifact %q is not in an object store (%s)", a.GetName(), a.GetRef())
	}
	bucket, name, ok := strings.Cut(rest, "/")
	if !ok || name == "" {
		return nil, fmt.Errorf("broker: bad artifact reference %q", a.GetRef())
	}
	data, err := readArtifact(ctx, js, bucket, name)
	if err != nil {
		return nil, fmt.Errorf("broker: artifact %s: %w", a.GetRef(), err)
	}
	if a.GetSha256() != "" {
		sum := sha256.Sum256(data)
		if hex.EncodeToString(sum[:]) != a.GetSha256() {
			return nil, fmt.Errorf("%w: %s", ErrArtifactMismatch, a.GetRef())
		}
	}
	return data, nil
}

// readArtifact reads object name of bucket; the object of a session's
// store that is not there any more is read from the archive (the session
// completed and was archived, ArchiveSession).
func readArtifact(ctx context.Context, js jetstream.JetStream, bucket, name string) ([]byte, error) {
	obj, err := js.ObjectStore(ctx, bucket)
	if err == nil {
		var r jetstream.ObjectResult
		if r, err = obj.Get(ctx, name); err == nil {
			defer r.Close()
			return io.ReadAll(r)
		}
	}
	session, ok := strings.CutPrefix(bucket, ObjectsName(""))
	if ok && ValidToken(session) && (errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrObjectNotFound)) {
		if data, aerr := archivedArtifact(ctx, js, session, name); aerr == nil {
			return data, nil
		}
	}
	return nil, err
}
