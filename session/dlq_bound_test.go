package session_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/session"
)

// TestDeadLettersBounded: a durable session refuses N+k envelopes for a
// node it does not have; its dead-letter stream keeps at most N of them
// (broker.DeadLetterMaxMsgs), the newest; the work stream keeps none of
// the refused envelopes.
func TestDeadLettersBounded(t *testing.T) {
	sv := serveSession(t, `digraph s { a [prompt="a"] }`, func(c *session.Config) { c.Durable = true })
	const n, k = broker.DeadLetterMaxMsgs, 50
	nc, err := sv.broker.NewConn()
	require.NoError(t, err)
	defer nc.Close()
	dlq, err := nc.SubscribeSync(broker.DeadLetter(sv.s.ID()))
	require.NoError(t, err)
	require.NoError(t, dlq.SetPendingLimits(-1, -1))
	require.NoError(t, nc.Flush())
	for i := range n + k {
		require.NoError(t, nc.Publish(broker.NodeIn(sv.s.ID(), "ghost"), fmt.Appendf(nil, `{"payload":{"message":"boo-%d"}}`, i)))
	}
	require.NoError(t, nc.Flush())
	// Every refusal is a dead letter on the subject...
	for i := range n + k {
		_, err := dlq.NextMsg(20 * time.Second)
		require.NoError(t, err, "dead letter %d", i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	js := sv.broker.JetStream()
	st, err := js.Stream(ctx, broker.DeadLetterStreamName(sv.s.ID()))
	require.NoError(t, err)
	// ...and the stream has stored the last one (its publication follows
	// the others' on the one connection).
	require.Eventually(t, func() bool {
		info, err := st.Info(ctx)
		return err == nil && info.State.LastSeq == n+k
	}, 20*time.Second, 10*time.Millisecond)
	info, err := st.Info(ctx)
	require.NoError(t, err)
	require.EqualValues(t, n, info.State.Msgs, "at most N dead letters")
	require.EqualValues(t, k+1, info.State.FirstSeq, "the oldest k went")
	first, err := st.GetMsg(ctx, info.State.FirstSeq)
	require.NoError(t, err)
	require.Contains(t, string(first.Data), fmt.Sprintf(`"boo-%d"`, k))
	require.Equal(t, broker.NodeIn(sv.s.ID(), "ghost"), first.Header.Get("Switchyard-Subject"))
	last, err := st.GetMsg(ctx, info.State.LastSeq)
	require.NoError(t, err)
	require.Contains(t, string(last.Data), fmt.Sprintf(`"boo-%d"`, n+k-1))

	work, err := js.Stream(ctx, broker.StreamName(sv.s.ID()))
	require.NoError(t, err)
	// The refused envelopes themselves do not stay in the work stream
	// either: its consumer removes each one it refuses.
	require.Eventually(t, func() bool {
		info, err := work.Info(ctx)
		return err == nil && info.State.Msgs == 0
	}, 30*time.Second, 10*time.Millisecond, "no refused envelope kept in the work stream")
}
