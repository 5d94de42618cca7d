package session

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/brokertest"
)

// A fenced write refused for its expected last sequence reads the
// sequence the refusal names: an owner whose fence is far behind (a
// stream that settled after a leader change) writes again after it, its
// mark still its own; the sequence is read out of the server's refusal.
func TestRefenceReadsTheRefusal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := brokertest.Start(t)
	j, l := ownedJournal(ctx, t, b, "refence")
	j.mu.Lock()
	defer j.mu.Unlock()
	for i := range 5 {
		require.NoError(t, j.putLocked(ctx, "k", []byte(fmt.Sprint(i))))
	}
	last := j.fence
	j.fence = 1 // far behind
	_, err := b.JetStream().Publish(ctx, "$KV."+l.bucket.Bucket()+".k", []byte("x"), jetstream.WithExpectLastSequence(1))
	require.Equal(t, last, reportedLast(err), "%v", err)
	require.NoError(t, j.putLocked(ctx, "k", []byte("after")))
	require.Greater(t, j.fence, last)
	require.Zero(t, reportedLast(fmt.Errorf("other")))
}
