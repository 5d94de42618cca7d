package session

import (
	"bytes"
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

// errIDTaken is a generated id (NewID) that met a session of the store.
var errIDTaken = errors.New("session: a generated id met another session's: its store is not this one's")

// idKey reads the session's id key, creating it the first time. mine,
// when given, is the key of a store just made for a generated id (NewID):
// nothing else can be under that id but a session whose id it met by
// chance, so the key stored must be mine — created now, or by an attempt
// before whose answer was lost — and any other key is that session's
// (errIDTaken). empty says the bucket was just made (a key is created at
// once).
func idKey(ctx context.Context, kv *broker.SessionBucket, empty bool, mine []byte) ([]byte, error) {
	if mine != nil {
		_, err := kv.Create(ctx, idKeyKey, mine)
		if err == nil {
			return mine, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, fmt.Errorf("id key: %w", err)
		}
		e, err := kv.Get(ctx, idKeyKey)
		if err != nil {
			return nil, fmt.Errorf("id key: %w", err)
		}
		if !bytes.Equal(e.Value(), mine) {
			return nil, errIDTaken
		}
		return mine, nil
	}
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
