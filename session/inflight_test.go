package session_test

import (
	"context"
	"fmt"
	"sync/atomic"
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

// TestNodeWaitsForItsJournal: a node runs at most actors.SetMaxInflight's
// firings ahead of its journal. With the journal's writes held, a node
// given 600 envelopes fires 100 of them and waits, the next one taken as
// its next firing's input and the other 499 in its buffer; once the journal writes again, the rest fire, each envelope
// once, and every delivery is acknowledged.
func TestNodeWaitsForItsJournal(t *testing.T) {
	nodeWaitsForItsJournal(t, "inflight", `digraph s { kind=session; a [type="test.echo"] }`, "a")
}

// TestNodeWaitsForItsJournalInPipeline is the same in a durable pipeline
// whose node b reads outside envelopes while a holds its run open (b's
// firings go on to c, which holds too).
func TestNodeWaitsForItsJournalInPipeline(t *testing.T) {
	nodeWaitsForItsJournal(t, "inflight-pipeline", `digraph p { max_visits=0;
		start [shape=Mdiamond]; exit [shape=Msquare]
		a [type="test.hold"]; b [type="test.echo"]; c [type="test.hold"]
		start -> a -> b -> c -> exit }`, "b")
}

func nodeWaitsForItsJournal(t *testing.T, id, src, node string) {
	const n, bound = 600, 100
	defer actors.SetMaxInflight(bound)()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b := brokertest.Start(t)
	g, diags := graph.Load(id+".dot", []byte(src))
	require.False(t, diags.HasErrors(), "%v", diags)
	fired := make(chan string, n)
	var count atomic.Int64
	echo := nodes.HandlerFunc(func(_ context.Context, in *nodes.Input) (*nodes.Outcome, error) {
		for _, m := range in.Messages {
			if m.From == "" { // from outside
				count.Add(1)
				fired <- m.Text
			}
		}
		return &nodes.Outcome{Status: nodes.StatusSuccess}, nil
	})
	hold := nodes.HandlerFunc(func(ctx context.Context, _ *nodes.Input) (*nodes.Outcome, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	s, err := session.Start(ctx, session.Config{ID: id, Graph: g, Broker: b, Durable: true,
		Handlers: map[string]nodes.Handler{"test.echo": echo, "test.hold": hold}})
	require.NoError(t, err)
	defer s.Stop()
	sys := s.System()
	held := session.HoldJournalWrites(s)
	released := false
	defer func() {
		if !released {
			held()
		}
	}()
	for i := range n {
		env := &pb.Envelope{Id: fmt.Sprintf("%s-%d", id, i), Kind: "handoff", Payload: &pb.Payload{Message: fmt.Sprintf("event %d", i)}}
		require.NoError(t, sys.Send(ctx, broker.NodeIn(id, node), env))
	}
	// Every envelope reached the node (it holds each delivery), and the
	// node fired as far as it may.
	for sys.Held() < n || count.Load() < bound {
		select {
		case <-ctx.Done():
			t.Fatalf("%d deliveries held, %d fired", sys.Held(), count.Load())
		case <-time.After(time.Millisecond):
		}
	}
	// The node's buffer, read on its actor after everything before: what
	// it did not fire waits there.
	var ready int
	for _, st := range sys.Buffers(ctx) {
		if st.Node == node {
			ready += st.Ready
		}
	}
	require.Equal(t, int64(bound), count.Load(), "fired past the bound while its journal was held")
	require.Equal(t, n-bound-1, ready, "the rest waits in the node's buffer (one taken as the next firing's input)")

	released = true
	held()
	seen := map[string]int{}
	for len(seen) < n {
		select {
		case text := <-fired:
			seen[text]++
		case <-ctx.Done():
			t.Fatalf("%d of %d fired after the journal wrote again", len(seen), n)
		}
	}
	for text, k := range seen {
		require.Equal(t, 1, k, "%s fired %d times", text, k)
	}
	for sys.Held() > 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("%d deliveries never acknowledged", sys.Held())
		case <-time.After(time.Millisecond):
		}
	}
	require.Equal(t, int64(n), count.Load())
}
