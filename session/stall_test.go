package session_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/actors"
	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/nodes"
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
	defer actors.SetFeedStall(25)()
	b := brokertest.Start(t)
	const id, n = "stall", 400
	g, diags := graph.Load("s.dot", []byte(`digraph s { kind=session; a [type="test.echo"] }`))
	require.False(t, diags.HasErrors(), "%v", diags)
	fired := make(chan string, n)
	var warnings []string
	warned := make(chan string, 16)
	echo := nodes.HandlerFunc(func(_ context.Context, in *nodes.Input) (*nodes.Outcome, error) {
		fired <- nodes.InputText(in.Messages)
		return &nodes.Outcome{Status: nodes.StatusSuccess}, nil
	})
	s, err := session.Start(context.Background(), session.Config{ID: id, Graph: g, Broker: b, Durable: true,
		Handlers: map[string]nodes.Handler{"test.echo": echo},
		Observer: func(ev *pb.Event) {
			if ev.Kind == "session.warning" {
				select {
				case warned <- ev.Message:
				default:
				}
			}
		}})
	require.NoError(t, err)
	defer s.Stop()
	deadline := time.After(30 * time.Second)
	sent := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			env := &pb.Envelope{Id: fmt.Sprintf("%s-%d", id, i), Kind: "handoff", Payload: &pb.Payload{Message: fmt.Sprintf("event %d", i)}}
			if err := s.System().Send(context.Background(), broker.NodeIn(id, "a"), env); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	seen := map[string]int{}
	for len(seen) < n {
		select {
		case text := <-fired:
			seen[text]++
		case err := <-sent:
			require.NoError(t, err)
			sent = nil
		case w := <-warned:
			warnings = append(warnings, w)
		case <-deadline:
			t.Fatalf("%d of %d events fired in 30 s (feed restarts: %d)", len(seen), n, s.System().FeedRestarts())
		}
	}
	for text, k := range seen {
		require.Equal(t, 1, k, "%s fired %d times", text, k)
	}
	require.GreaterOrEqual(t, s.System().FeedRestarts(), int64(n/25-1), "the feed stalls every 25 deliveries")
	require.Empty(t, warnings, "no delivery was lost on the way (no re-creation of the consumer)")
}
