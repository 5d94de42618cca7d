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

// PlacementWait is how long creating a replicated stream or bucket waits
// for the cluster to have servers to place its replicas on. A JetStream
// meta leader places replicas only on servers it has current statistics
// of: for a moment after a server (re)started, or after a leader was
// elected, it refuses an R3 resource with "no suitable peers for
// placement" although every server is up. A cluster with too few servers
// for the replicas asked gets the same refusal after this wait.
const PlacementWait = 15 * time.Second

// Unplaced reports whether err is JetStream's refusal to place a
// resource's replicas for want of servers online (never heard from yet,
// or offline), which a server (re)joining ends; not one for want of
// storage or for tags, which waiting does not change.
func Unplaced(err error) bool {
	const noPeers = 10005 // the server's JSClusterNoPeersErrF
	var apiErr *jetstream.APIError
	var desc string
	switch {
	case errors.As(err, &apiErr) && apiErr.ErrorCode == noPeers:
		desc = apiErr.Description
	case err != nil && strings.Contains(err.Error(), "no suitable peers for placement"):
		desc = err.Error()
	default:
		return false
	}
	for _, permanent := range []string{"insufficient storage", "exclude tag", "tag not unique", "not enabled"} {
		if strings.Contains(desc, permanent) {
			return false
		}
	}
	return true
}

// placed calls create until it succeeds, fails otherwise than Unplaced,
// ctx ends, or PlacementWait has passed.
func placed[T any](ctx context.Context, create func() (T, error)) (T, error) {
	deadline := time.Now().Add(PlacementWait)
	wait := 50 * time.Millisecond
	for {
		v, err := create()
		if !Unplaced(err) || time.Now().After(deadline) {
			return v, err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return v, err
		}
		if wait *= 2; wait > time.Second {
			wait = time.Second
		}
	}
}
