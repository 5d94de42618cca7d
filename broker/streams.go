package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Storage chooses where JetStream keeps a session.
type Storage int

// Storage kinds.
const (
	FileStorage Storage = iota
	MemoryStorage
)

func (s Storage) js() jetstream.StorageType {
	if s == MemoryStorage {
		return jetstream.MemoryStorage
	}
	return jetstream.FileStorage
}

// resourceName turns a session id into a JetStream name ('-' is kept; ids
// are ValidTokens so nothing else needs escaping).
func resourceName(prefix, session string) string {
	return prefix + strings.ReplaceAll(session, ".", "_")
}

// StreamName is the name of a session's envelope stream.
func StreamName(session string) string { return resourceName("SY_", session) }

// EnsureSessionStream creates (or updates) the session's work stream: edges,
// inboxes and control subjects, with a two-minute de-duplication window for
// Nats-Msg-Id. Events are not in it: they are a live feed, and a session that
// runs for days must not keep every event of its life in its work stream.
func EnsureSessionStream(ctx context.Context, js jetstream.JetStream, session string, st Storage) (jetstream.Stream, error) {
	if !ValidToken(session) {
		return nil, fmt.Errorf("broker: invalid session id %q", session)
	}
	return js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: StreamName(session),
		Subjects: []string{
			"sy." + session + ".edge.>",
			"sy." + session + ".node.*.in",
			"sy." + session + ".ctl.>",
		},
		Storage:    st.js(),
		Duplicates: 2 * time.Minute,
	})
}

// SessionKV is the session's key-value bucket for checkpoints and node state.
func SessionKV(ctx context.Context, js jetstream.JetStream, session string, st Storage) (jetstream.KeyValue, error) {
	return js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: resourceName("sy_kv_", session), Storage: st.js(), History: 16})
}

// SessionObjects is the session's object store for artifacts.
func SessionObjects(ctx context.Context, js jetstream.JetStream, session string, st Storage) (jetstream.ObjectStore, error) {
	return js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: resourceName("sy_obj_", session), Storage: st.js()})
}

// DeleteSession removes the session's stream, KV bucket and object store;
// resources that do not exist are not an error.
func DeleteSession(ctx context.Context, js jetstream.JetStream, session string) error {
	var errs []error
	if err := js.DeleteStream(ctx, StreamName(session)); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		errs = append(errs, err)
	}
	if err := js.DeleteKeyValue(ctx, resourceName("sy_kv_", session)); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
		errs = append(errs, err)
	}
	if err := js.DeleteObjectStore(ctx, resourceName("sy_obj_", session)); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
