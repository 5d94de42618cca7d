package session_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/nodes"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

// The graphs of the tests that feed a node outside envelopes: a reactive
// session's node a, and a durable pipeline's node b while a holds its run
// open (b's firings go on to c, which holds too, so the pipeline runs
// until it is stopped).
const (
	outsideSessionSrc  = `digraph s { kind=session; a [type="test.echo"] }`
	outsidePipelineSrc = `digraph p { max_visits=0;
		start [shape=Mdiamond]; exit [shape=Msquare]
		a [type="test.hold"]; b [type="test.echo"]; c [type="test.hold"]
		start -> a -> b -> c -> exit }`
)

// outsideRig is a durable session whose test.echo nodes report each
// outside message they get (fired, holding up to the envelopes sent, and
// count) and whose test.hold nodes hold their firing until it stops.
type outsideRig struct {
	s     *session.Session
	b     *broker.Broker
	id    string
	fired chan string
	count atomic.Int64
}

// startOutside starts src as durable session id, for up to n outside
// envelopes; tune, when given, changes its configuration first.
func startOutside(t *testing.T, id, src string, n int, tune func(*session.Config)) *outsideRig {
	t.Helper()
	g, diags := graph.Load(id+".dot", []byte(src))
	require.False(t, diags.HasErrors(), "%v", diags)
	r := &outsideRig{id: id, fired: make(chan string, n)}
	echo := nodes.HandlerFunc(func(_ context.Context, in *nodes.Input) (*nodes.Outcome, error) {
		for _, m := range in.Messages {
			if m.From == "" { // from outside
				r.count.Add(1)
				r.fired <- m.Text
			}
		}
		return &nodes.Outcome{Status: nodes.StatusSuccess}, nil
	})
	hold := nodes.HandlerFunc(func(ctx context.Context, _ *nodes.Input) (*nodes.Outcome, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	cfg := session.Config{ID: id, Graph: g, Durable: true,
		Handlers: map[string]nodes.Handler{"test.echo": echo, "test.hold": hold}}
	if tune != nil {
		tune(&cfg)
	}
	if cfg.Broker == nil { // a broker of the test's own when tune gave none
		cfg.Broker = brokertest.Start(t)
	}
	r.b = cfg.Broker
	s, err := session.Start(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	r.s = s
	return r
}

// send stores n envelopes ("event 0" …) for node, as its inbox's
// publisher would, through the session's own Send.
func (r *outsideRig) send(ctx context.Context, node string, n int) error {
	for i := range n {
		if err := r.s.System().Send(ctx, broker.NodeIn(r.id, node), r.event(i)); err != nil {
			return err
		}
	}
	return nil
}

// publish is send from outside: a JetStream publish of each envelope on
// node's inbox, with its id as the message id, as switchyard pub makes.
func (r *outsideRig) publish(ctx context.Context, node string, n int) error {
	js := r.b.JetStream()
	for i := range n {
		env := r.event(i)
		data, err := proto.Marshal(env)
		if err != nil {
			return err
		}
		if _, err := js.Publish(ctx, broker.NodeIn(r.id, node), data, jetstream.WithMsgID(env.GetId())); err != nil {
			return err
		}
	}
	return nil
}

// event is the i-th envelope send and publish give.
func (r *outsideRig) event(i int) *pb.Envelope {
	return &pb.Envelope{Id: fmt.Sprintf("%s-%d", r.id, i), Kind: "handoff", Payload: &pb.Payload{Message: fmt.Sprintf("event %d", i)}}
}

// holdJournal holds the session's journal writes (session.HoldJournalWrites)
// until the returned function, or the test's end, lets them go.
func (r *outsideRig) holdJournal(t *testing.T) (release func()) {
	var once sync.Once
	held := session.HoldJournalWrites(r.s)
	release = func() { once.Do(held) }
	t.Cleanup(release)
	return release
}

// firesEachOnce waits until the echo node fired all n envelopes sent, and
// checks that each fired once and every delivery was acknowledged after.
func (r *outsideRig) firesEachOnce(ctx context.Context, t *testing.T, n int) {
	t.Helper()
	seen := map[string]int{}
	for len(seen) < n {
		select {
		case text := <-r.fired:
			seen[text]++
		case <-ctx.Done():
			t.Fatalf("%d of %d fired", len(seen), n)
		}
	}
	for text, k := range seen {
		require.Equal(t, 1, k, "%s fired %d times", text, k)
	}
	sys := r.s.System()
	waitUntil(ctx, t, func() bool { return sys.Held() == 0 },
		func() string { return fmt.Sprintf("deliveries never acknowledged: %d held", sys.Held()) })
	require.Equal(t, int64(n), r.count.Load())
}
