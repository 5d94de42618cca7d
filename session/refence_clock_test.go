package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/session"
)

// A fenced journal write refused because something else wrote the bucket
// meanwhile is made again after a pause for the server. The pause is real
// time: a session on a fake clock that nothing advances still stores its
// record (it waited on the fake clock forever).
func TestRefencedWriteOnFakeClock(t *testing.T) {
	fake := clock.NewFake(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	ack := nodes.HandlerFunc(func(context.Context, *nodes.Input) (*nodes.Outcome, error) {
		return &nodes.Outcome{Status: nodes.StatusSuccess, Response: "ok"}, nil
	})
	sv := serveSession(t, `digraph s { a [type="test.ack"] }`, func(c *session.Config) {
		c.ID, c.Durable, c.Clock = "refence", true, fake
		c.Handlers = map[string]nodes.Handler{"test.ack": ack}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	kv, err := sv.broker.JetStream().KeyValue(ctx, broker.KVName("refence"))
	require.NoError(t, err)
	_, err = kv.Put(ctx, "foreign", []byte("moves the bucket's last sequence"))
	require.NoError(t, err)
	sv.pub("a", "one")
	sv.wait("checkpoint.saved", "a")
}
