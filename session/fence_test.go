package session

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/internal/brokertest"
)

// ownedJournal is a journal of session id holding its lease (released
// when the test ends), as a session's own is wired: its bucket, fence
// and owner's token.
func ownedJournal(ctx context.Context, t *testing.T, b *broker.Broker, id string, opts ...broker.Option) (*journal, *lease) {
	t.Helper()
	l, err := claim(ctx, &Config{ID: id, Broker: b, Clock: clock.Real()}, false, opts...)
	require.NoError(t, err)
	t.Cleanup(l.release)
	j := newJournal("", id, "g", clock.Real())
	j.kv, j.js, j.fence, j.token = l.bucket, b.JetStream(), l.fence, l.owner.Token
	return j, l
}

// inShared are the options that make a new session's store in the shared
// bucket, as a prepared store is.
func inShared(ctx context.Context, t *testing.T, b *broker.Broker) []broker.Option {
	t.Helper()
	kv, err := broker.SharedKV(ctx, b.JetStream(), b.Storage(), 1)
	require.NoError(t, err)
	return []broker.Option{broker.Fresh(), broker.InShared(kv)}
}

// The journal of a process that lost its lease writes nothing: every write
// expects the bucket's last sequence its owner knows (in the shared
// bucket, its owner's mark to be the last on the mark's subject), and the
// new owner's mark moved it. A write whose acknowledgement was lost (the
// owner's own write moved the sequence) is made again.
func TestJournalFenced(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			b := brokertest.Start(t)
			var opts []broker.Option
			if shared {
				opts = inShared(ctx, t, b)
			}
			j, l1 := ownedJournal(ctx, t, b, "fenced", opts...)
			require.Equal(t, shared, l1.bucket.Shared())
			j.mu.Lock()
			require.NoError(t, j.putLocked(ctx, "k", []byte("1")))
			j.fence-- // as if the acknowledgement of that write had been lost
			require.NoError(t, j.putLocked(ctx, "k", []byte("2")), "still the owner: written again")
			require.NoError(t, j.writeRecords(context.Background(), []entry{{first: 1, last: 1, data: []byte("r1")}, {first: 2, last: 2, data: []byte("r2")}}))
			j.mu.Unlock()

			// Another process takes the session over (its clock is past the
			// TTL); it finds the session where it is.
			l2, err := claim(ctx, &Config{ID: "fenced", Broker: b, Clock: clock.NewFake(time.Now().Add(time.Hour))}, false)
			require.NoError(t, err)
			defer l2.release()
			require.Equal(t, shared, l2.bucket.Shared())

			j.mu.Lock()
			require.ErrorIs(t, j.putLocked(ctx, "k", []byte("3")), ErrLeaseLost)
			require.ErrorIs(t, j.writeRecords(context.Background(), []entry{{first: 3, last: 3, data: []byte("r3")}}), ErrLeaseLost)
			j.mu.Unlock()
			e, err := l1.bucket.Get(ctx, "k")
			require.NoError(t, err)
			require.Equal(t, "2", string(e.Value()), "the ex-owner's write did not land")
			_, err = l1.bucket.Get(ctx, recordKey(3))
			require.Error(t, err, "nor its record")
			e, err = l1.bucket.Get(ctx, recordKey(2))
			require.NoError(t, err)
			require.Equal(t, "r2", string(e.Value()))
		})
	}
}
