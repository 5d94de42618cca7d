package session

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/brokertest"
)

// lastFromLeader reads what a KV Get reads — the key's last value and its
// revision — through the stream leader's API (a bucket allows direct gets,
// which replicas not caught up may answer), and says when there is none.
func TestLastFromLeader(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := brokertest.Start(t)
	kv, err := b.JetStream().CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "lfl"})
	require.NoError(t, err)
	st, err := b.JetStream().Stream(ctx, "KV_lfl")
	require.NoError(t, err)
	require.True(t, st.CachedInfo().Config.AllowDirect, "KV buckets allow direct gets")
	_, err = kv.Put(ctx, "k", []byte("1"))
	require.NoError(t, err)
	_, err = kv.Put(ctx, "other", []byte("x"))
	require.NoError(t, err)
	rev, err := kv.Put(ctx, "k", []byte("2"))
	require.NoError(t, err)

	data, seq, err := lastFromLeader(ctx, b.JetStream(), "KV_lfl", "$KV.lfl.k")
	require.NoError(t, err)
	require.Equal(t, "2", string(data))
	require.Equal(t, rev, seq)
	_, _, err = lastFromLeader(ctx, b.JetStream(), "KV_lfl", "$KV.lfl.none")
	require.ErrorIs(t, err, jetstream.ErrKeyNotFound)
}
