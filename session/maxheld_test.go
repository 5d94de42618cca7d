package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/actors"
	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/internal/brokertest"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

// TestSessionHoldsAtMostMaxHeld: on a broker whose sessions hold at most
// broker.MinMaxHeld envelopes (serve --max-held), a node given 1,500
// while its journal is held (so it acknowledges none) is delivered
// exactly the bound; the stream keeps the rest undelivered, and the
// session says why (session.held_full, once). Once the journal writes
// again every envelope fires once and every delivery is acknowledged.
func TestSessionHoldsAtMostMaxHeld(t *testing.T) {
	holdsAtMostMaxHeld(t, "maxheld", outsideSessionSrc, "a")
}

// TestSessionHoldsAtMostMaxHeldInPipeline is the same in a durable
// pipeline whose node b reads outside envelopes while a holds its run
// open.
func TestSessionHoldsAtMostMaxHeldInPipeline(t *testing.T) {
	holdsAtMostMaxHeld(t, "maxheld-pipeline", outsidePipelineSrc, "b")
}

func holdsAtMostMaxHeld(t *testing.T, id, src, node string) {
	const n, limit = 1500, broker.MinMaxHeld
	defer actors.SetMaxInflight(100)()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b := brokertest.Start(t, brokertest.Configure(func(c *broker.Config) { c.MaxHeld = limit }))
	full := make(chan *pb.Event, 8)
	r := startOutside(t, id, src, n, func(cfg *session.Config) {
		cfg.Broker = b
		cfg.Observer = func(ev *pb.Event) {
			if ev.GetKind() == "session.held_full" {
				full <- ev
			}
		}
	})
	sys := r.s.System()
	release := r.holdJournal(t)
	require.NoError(t, r.publish(ctx, node, n)) // each stored: acknowledged by the stream
	waitUntil(ctx, t, func() bool { return sys.Held() == limit },
		func() string { return "the node never held the bound" })
	select {
	case ev := <-full:
		require.Contains(t, ev.GetMessage(), "1024 envelopes unacknowledged")
	case <-ctx.Done():
		t.Fatal("no session.held_full at the bound")
	}
	// The server's side: every envelope stored, the first bound of them
	// delivered and unacknowledged, the rest not delivered. (The
	// consumer's NumPending is counted as the stream tells it of new
	// messages, and may lag: the delivered sequence is exact.)
	st, err := b.JetStream().Stream(ctx, broker.StreamName(id))
	require.NoError(t, err)
	cons, err := st.Consumer(ctx, actors.ConsumerName)
	require.NoError(t, err)
	info, err := cons.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, limit, info.NumAckPending)
	require.EqualValues(t, limit, info.Delivered.Stream, "delivered past the bound")
	require.EqualValues(t, n, st.CachedInfo().State.Msgs, "the rest waits in the stream")
	require.Equal(t, int64(limit), sys.Held(), "held past the bound")

	release()
	r.firesEachOnce(ctx, t, n)
	require.Empty(t, full, "said again without falling to half the bound first")
}
