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
	stalledFeed(t, "stall", `digraph s { kind=session; a [type="test.echo"] }`, "a")
}

// TestStalledFeedConsumedAgainInPipeline is the same in a durable
// pipeline whose node b reads outside envelopes (its work stream made by
// the first one) while a holds its run open; b's firings go on to c,
// which holds too, so the pipeline runs until it is stopped.
func TestStalledFeedConsumedAgainInPipeline(t *testing.T) {
	stalledFeed(t, "stall-pipeline", `digraph p { max_visits=0;
		start [shape=Mdiamond]; exit [shape=Msquare]
		a [type="test.hold"]; b [type="test.echo"]; c [type="test.hold"]
		start -> a -> b -> c -> exit }`, "b")
}

// stalledFeed runs the graph src as durable session id with every feed
// stalling after 25 deliveries, publishes 400 envelopes to node's inbox,
// and checks each fires node once, well before the heartbeats would have
// restarted the feed 16 times, with the feed consumed again, not the
// consumer re-created.
func stalledFeed(t *testing.T, id, src, node string) {
	defer actors.SetFeedStall(25)()
	b := brokertest.Start(t)
	const n = 400
	g, diags := graph.Load(id+".dot", []byte(src))
	require.False(t, diags.HasErrors(), "%v", diags)
	fired := make(chan string, n)
	var warnings []string
	warned := make(chan string, 16)
	echo := nodes.HandlerFunc(func(_ context.Context, in *nodes.Input) (*nodes.Outcome, error) {
		for _, m := range in.Messages {
			if m.From == "" { // from outside
				fired <- m.Text
			}
		}
		return &nodes.Outcome{Status: nodes.StatusSuccess}, nil
	})
	hold := nodes.HandlerFunc(func(ctx context.Context, _ *nodes.Input) (*nodes.Outcome, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	s, err := session.Start(context.Background(), session.Config{ID: id, Graph: g, Broker: b, Durable: true,
		Handlers: map[string]nodes.Handler{"test.echo": echo, "test.hold": hold},
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
			if err := s.System().Send(context.Background(), broker.NodeIn(id, node), env); err != nil {
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
