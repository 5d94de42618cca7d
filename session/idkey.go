package session

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard/switchyard/actors"
	"github.com/switchyard/switchyard/broker"
)

// idKeyKey holds, in a durable session's KV bucket, the secret that signs
// the runtime's envelope ids (actors.Config.IDKey): every process that
// runs the session — after a restart, a resume, a takeover — signs with
// the same key, so replayed envelopes keep their ids. Outside roles cannot
// read the bucket.
const idKeyKey = "session.idkey"

// idKey reads the session's id key, creating it the first time.
func idKey(ctx context.Context, kv *broker.SessionBucket, empty bool) ([]byte, error) {
	if empty {
		// A bucket just made holds no key: one is made at once (a key
		// written meanwhile by another process would be read below).
		key := actors.NewIDKey()
		if _, err := kv.Create(ctx, idKeyKey, key); err == nil {
			return key, nil
		}
	}
	for range 2 {
		e, err := kv.Get(ctx, idKeyKey)
		if err == nil {
			if len(e.Value()) < 16 {
				return nil, fmt.Errorf("id key: %d bytes in %s, want at least 16", len(e.Value()), idKeyKey)
			}
			return e.Value(), nil
		}
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, fmt.Errorf("id key: %w", err)
		}
		key := actors.NewIDKey()
		if _, err := kv.Create(ctx, idKeyKey, key); err == nil {
			return key, nil
		} else if !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, fmt.Errorf("id key: %w", err)
		}
		// Another process created it first: read theirs.
	}
	return nil, errors.New("id key: could not be read nor created")
}
