package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/actors"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

// TestStalledFeedConsumedAgain: a feed of the session's consumer that
// stops asking the server for messages (nats.go's renewal skipped while
// its previous request was being sent: no request left on the server) is
// found by the consumer's watch and consumed again at once, not after the
// 4 s of missing heartbeats that make nats.go ask again. Every feed here
// asks for 25 messages and never again by itself (actors.SetFeedStall):
// 400 events stall it 16 times — about a minute of heartbeats, a second
// with the watch — and each event fires once.
func TestStalledFeedConsumedAgain(t *testing.T) {
	stalledFeed(t, "stall", outsideSessionSrc, "a")
}

// TestStalledFeedConsumedAgainInPipeline is the same in a durable
// pipeline whose node b reads outside envelopes (its work stream made by
// the first one) while a holds its run open.
func TestStalledFeedConsumedAgainInPipeline(t *testing.T) {
	stalledFeed(t, "stall-pipeline", outsidePipelineSrc, "b")
}

// stalledFeed runs the graph src as durable session id with every feed
// stalling after 25 deliveries, publishes 400 envelopes to node's inbox,
// and checks each fires node once, well before the heartbeats would have
// restarted the feed 16 times, with the feed consumed again, not the
// consumer re-created.
func stalledFeed(t *testing.T, id, src, node string) {
	defer actors.SetFeedStall(25)()
	const n = 400
	var warnings []string
	warned := make(chan string, 16)
	r := startOutside(t, id, src, n, func(c *session.Config) {
		c.Observer = func(ev *pb.Event) {
			if ev.Kind == "session.warning" {
				select {
				case warned <- ev.Message:
				default:
				}
			}
		}
	})
	deadline := time.After(30 * time.Second)
	sent := make(chan error, 1)
	go func() { sent <- r.send(context.Background(), node, n) }()
	seen := map[string]int{}
	for len(seen) < n {
		select {
		case text := <-r.fired:
			seen[text]++
		case err := <-sent:
			require.NoError(t, err)
			sent = nil
		case w := <-warned:
			warnings = append(warnings, w)
		case <-deadline:
			t.Fatalf("%d of %d events fired in 30 s (feed restarts: %d)", len(seen), n, r.s.System().FeedRestarts())
		}
	}
	for text, k := range seen {
		require.Equal(t, 1, k, "%s fired %d times", text, k)
	}
	require.GreaterOrEqual(t, r.s.System().FeedRestarts(), int64(n/25-1), "the feed stalls every 25 deliveries")
	require.Empty(t, warnings, "no delivery was lost on the way (no re-creation of the consumer)")
}
