package pool

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/brokertest"
)

// TestEnsuredStreamsAreAsAsked: the streams EnsureStream made, as the
// server reports them, are what it asks — so a later call (each worker's
// start, each session's first job) leaves them alone. An update racing a
// consumer being made is a data race inside nats-server 2.15.2, and the
// server reports unset limits as -1 where the configuration says 0.
func TestEnsuredStreamsAreAsAsked(t *testing.T) {
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, EnsureStream(ctx, b.JetStream(), b.Storage(), 1))
	for name, want := range map[string]jetstream.StreamConfig{
		Stream:        workStreamConfig(jetstream.FileStorage, 1),
		OutcomeStream: outcomeStreamConfig(jetstream.FileStorage, 1),
	} {
		s, err := b.JetStream().Stream(ctx, name)
		require.NoError(t, err)
		require.True(t, sameLimits(s.CachedInfo().Config, want), "%s would be updated again", name)
	}
}
