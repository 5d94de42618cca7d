package broker

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// RideThrough is how long a durable write waits for the server to come
// back (a restart, a leader election) before it gives up.
const RideThrough = 2 * time.Minute

// Transient reports whether err is an error a NATS server restarting or
// electing a leader causes, after which the same write may succeed: a
// timeout, no responders, a connection reconnecting, JetStream briefly
// unavailable. Errors that mean the write can never succeed (storage full,
// limits, permissions, a closed connection) are not transient.
func Transient(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, context.Canceled):
		return false
	case errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, nats.ErrDisconnected),
		errors.Is(err, nats.ErrConnectionDraining), errors.Is(err, jetstream.ErrJetStreamNotEnabled):
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		// JetStream system temporarily unavailable (no leader yet); not
		// "insufficient resources", which is also a 503.
		const clusterNotAvailable = 10008 // the server's JSClusterNotAvailErr
		return apiErr.ErrorCode == clusterNotAvailable ||
			strings.Contains(strings.ToLower(apiErr.Description), "temporarily unavailable")
	}
	return false
}

// Retry calls f until it succeeds, fails with an error that is not
// Transient, ctx ends, or RideThrough has passed. Each call gets a context
// of its own, bounded by attempt.
func Retry(ctx context.Context, attempt time.Duration, f func(ctx context.Context) error) error {
	deadline := time.Now().Add(RideThrough)
	wait := 20 * time.Millisecond
	for {
		actx, cancel := context.WithTimeout(ctx, attempt)
		err := f(actx)
		cancel()
		if err == nil || !Transient(err) || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
		if wait *= 2; wait > time.Second {
			wait = time.Second
		}
	}
}
