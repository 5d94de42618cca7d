package session_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard/switchyard/actors"
	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/nodes"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

// TestContextTravelsAsDeltas: in a chain, an edge envelope carries only
// what its producer set over its base (not the context, which grows with
// every node), and each node still sees the whole context.
func TestContextTravelsAsDeltas(t *testing.T) {
	const n = 40
	var b strings.Builder
	b.WriteString("digraph chain { start [shape=Mdiamond]; exit [shape=Msquare]\n")
	prev := "start"
	for i := range n {
		fmt.Fprintf(&b, "n%d [type=\"custom.echo\"]\n%s -> n%d\n", i, prev, i)
		prev = fmt.Sprintf("n%d", i)
	}
	fmt.Fprintf(&b, "%s -> exit }", prev)

	var mu sync.Mutex
	seen := map[string]int{} // node -> how many earlier nodes' keys it saw
	r := newRun(t)
	r.reg = func(reg *nodes.Registry) {
		require.NoError(t, reg.Register(nodes.Info{Type: "custom.echo", Handler: nodes.HandlerFunc(
			func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
				k := 0
				for key := range in.Context {
					if strings.HasPrefix(key, "seen.") {
						k++
					}
				}
				mu.Lock()
				seen[in.Node.ID] = k
				mu.Unlock()
				return &nodes.Outcome{Status: nodes.StatusSuccess, ContextUpdates: map[string]string{"seen." + in.Node.ID: "yes"}}, nil
			})}))
	}
	cfg := r.config(r.load(b.String()))
	cfg.ID = "deltas"
	// A spy on the edges, as any NATS client: the hops go over the bus.
	cfg.BusHops = true
	nc, err := r.broker.NewConn()
	require.NoError(t, err)
	defer nc.Close()
	var envs []*pb.Envelope
	sub, err := nc.Subscribe(broker.Edge("deltas", ">"), func(m *nats.Msg) {
		env := &pb.Envelope{}
		if proto.Unmarshal(m.Data, env) == nil {
			mu.Lock()
			envs = append(envs, env)
			mu.Unlock()
		}
	})
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	defer sub.Unsubscribe()

	rep := r.runConfig(cfg)
	require.Equal(t, "success", rep.Status, rep.Reason)
	mu.Lock()
	defer mu.Unlock()
	for i := range n {
		require.Equal(t, i, seen[fmt.Sprintf("n%d", i)], "n%d sees every earlier node's key", i)
	}
	require.NoError(t, nc.Flush())
	require.GreaterOrEqual(t, len(envs), n)
	last := uint64(0)
	for _, e := range envs {
		if e.GetFromNode() == "start" {
			continue
		}
		require.NotEmpty(t, e.GetContextBase(), "%s is a delta", e.GetId())
		require.Less(t, len(e.GetContext()), 10, "%s carries the keys its producer set, not the run's", e.GetId())
		require.Greater(t, e.GetContextVersion(), last, "the version grows along the chain")
		last = e.GetContextVersion()
	}
	cp, err := session.ReadCheckpoint(r.logs)
	if err == nil { // kept when the run did not succeed; else removed
		require.Equal(t, "yes", cp.Context["seen.n0"])
	}
}

// TestContextDeltaAfterRestart: a durable session's process dies with an
// envelope in flight whose context is a delta over a base that process
// held; the next process delivers it again and resolves its context from
// the journal, so the node sees every key set before the crash.
func TestContextDeltaAfterRestart(t *testing.T) {
	data := t.TempDir()
	src := `digraph d { start [shape=Mdiamond]; exit [shape=Msquare]
		a [type="custom.echo"]; b [type="custom.echo"]; c [type="custom.hang"]
		start -> a -> b -> c -> exit }`
	var mu sync.Mutex
	block := true
	var got map[string]string
	blocked := make(chan struct{}, 1)
	reg := func(reg *nodes.Registry) {
		echo := nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
			return &nodes.Outcome{Status: nodes.StatusSuccess, ContextUpdates: map[string]string{"seen." + in.Node.ID: "yes"}}, nil
		})
		hang := nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
			mu.Lock()
			b := block
			if !b {
				got = map[string]string{}
				for k, v := range in.Context {
					got[k] = v
				}
			}
			mu.Unlock()
			if b {
				blocked <- struct{}{}
				<-ctx.Done()
				return nil, ctx.Err()
			}
			return &nodes.Outcome{Status: nodes.StatusSuccess}, nil
		})
		require.NoError(t, reg.Register(nodes.Info{Type: "custom.echo", Handler: echo}))
		require.NoError(t, reg.Register(nodes.Info{Type: "custom.hang", Handler: hang}))
	}
	start := func() *broker.Broker {
		return brokertest.Start(t, brokertest.Configure(func(c *broker.Config) { c.DataDir = data }))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	b1 := start()
	r1 := &run{t: t, broker: b1, reg: reg, ctx: map[string]string{"given": "1"}}
	cfg := r1.durable(src, "delta1")
	s1, err := session.Start(ctx, cfg)
	require.NoError(t, err)
	select {
	case <-blocked:
	case <-ctx.Done():
		t.Fatal("c never started")
	}
	s1.Stop()
	require.NoError(t, b1.Close())

	mu.Lock()
	block = false
	mu.Unlock()
	b2 := start()
	r2 := &run{t: t, broker: b2, reg: reg}
	cfg2 := r2.durable(src, "delta1")
	s2, err := session.Resume(ctx, cfg2)
	require.NoError(t, err)
	rep, err := s2.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status, rep.Reason)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, "yes", got["seen.a"])
	require.Equal(t, "yes", got["seen.b"])
	require.Equal(t, "1", got["given"])
	require.Equal(t, "c", got["current_node"])
	require.Equal(t, "success", got["internal.outcome.b"])

	cp, err := session.LoadCheckpoint(ctx, b2, "delta1", 0)
	require.NoError(t, err)
	require.Equal(t, "yes", cp.Context["seen.b"], "the journal's last context is whole")
	require.Equal(t, "exit", cp.Context["current_node"])
}

// TestContextBaseOnlyFromTheRuntime: an outside envelope's context is its
// whole context — a base and version it names are not obeyed (it cannot
// take another token's context, nor fail its own) — and the runtime's own
// envelope whose base is found nowhere is refused with the reason, its
// node not run.
func TestContextBaseOnlyFromTheRuntime(t *testing.T) {
	var mu sync.Mutex
	got := map[string][]map[string]string{}
	h := nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
		c := map[string]string{}
		for k, v := range in.Context {
			c[k] = v
		}
		mu.Lock()
		got[in.Node.ID] = append(got[in.Node.ID], c)
		mu.Unlock()
		return &nodes.Outcome{Status: nodes.StatusSuccess, ContextUpdates: map[string]string{"by." + in.Node.ID: "1"}}, nil
	})
	sv := serveSession(t, `digraph s { a [type="test.ctx"]; b [type="test.ctx"]; a -> b }`, func(c *session.Config) {
		c.Handlers = map[string]nodes.Handler{"test.ctx": h}
	})

	nc, err := sv.broker.NewConn()
	require.NoError(t, err)
	defer nc.Close()
	outside := &pb.Envelope{Id: "outside-1", Kind: "handoff", Payload: &pb.Payload{Message: "hi"},
		ContextBase: "some-envelope", ContextVersion: 9,
		Context: []*pb.KV{{Key: "given", Value: "yes"}, {Key: "internal.outcome.a", Value: "fail"}}}
	data, err := proto.Marshal(outside)
	require.NoError(t, err)
	require.NoError(t, nc.Publish(broker.NodeIn(sv.s.ID(), "a"), data))
	sv.wait("node.completed", "b")
	mu.Lock()
	require.Len(t, got["a"], 1)
	require.Equal(t, "yes", got["a"][0]["given"], "the outside context is the whole context")
	require.NotContains(t, got["a"][0], "internal.outcome.a", "engine keys are dropped")
	require.Equal(t, "yes", got["b"][0]["given"])
	require.Equal(t, "1", got["b"][0]["by.a"])
	mu.Unlock()

	own := &pb.Envelope{Id: sv.s.ID() + ".lost", Kind: "handoff", ToNode: "b", Payload: &pb.Payload{Message: "x"},
		ContextBase: sv.s.ID() + ".nowhere", ContextVersion: 3, Context: []*pb.KV{{Key: "k", Value: "v"}}}
	require.NoError(t, sv.s.System().Send(context.Background(), broker.NodeIn(sv.s.ID(), "b"), own))
	ev := sv.wait("node.refused", "b")
	require.Contains(t, ev.Message, "run context not resolvable")
	mu.Lock()
	require.Len(t, got["b"], 1, "b did not run on a context it could not resolve")
	mu.Unlock()
}

// TestContextStoreFull: when the in-process context store is full, the
// envelopes sent meanwhile carry their whole context (nothing is evicted:
// no receiver depends on finding a base elsewhere), nothing is refused,
// and every receiver sees its sender's context.
func TestContextStoreFull(t *testing.T) {
	t.Cleanup(actors.SetContextStoreBound(1))
	var mu sync.Mutex
	saw := map[string]string{}
	// An outside envelope carries its whole context: src's are deltas over
	// what a sent it.
	sv := serveSession(t, `digraph s { a [type="custom.set"]; src [type="custom.pass"]
		b1 [type="custom.look"]; b2 [type="custom.look"]; b3 [type="custom.look"]
		a -> src; src -> b1; src -> b2; src -> b3 }`, func(c *session.Config) {
		c.BusHops = true // the spy below reads the hops on the bus
		c.Handlers = map[string]nodes.Handler{
			"custom.pass": nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
				return &nodes.Outcome{Status: nodes.StatusSuccess}, nil
			}),
			"custom.set": nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
				return &nodes.Outcome{Status: nodes.StatusSuccess, ContextUpdates: map[string]string{"from.src": in.Messages[0].Text}}, nil
			}),
			"custom.look": nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
				mu.Lock()
				saw[in.Node.ID] = in.Context["from.src"]
				mu.Unlock()
				return &nodes.Outcome{Status: nodes.StatusSuccess}, nil
			}),
		}
	})
	// A spy on the edges, as any NATS client.
	nc, err := sv.broker.NewConn()
	require.NoError(t, err)
	defer nc.Close()
	fromSrc := make(chan *pb.Envelope, 8)
	sub, err := nc.Subscribe(broker.Edge(sv.s.ID(), ">"), func(m *nats.Msg) {
		env := &pb.Envelope{}
		if proto.Unmarshal(m.Data, env) == nil && env.GetFromNode() == "src" {
			fromSrc <- env
		}
	})
	require.NoError(t, err)
	defer sub.Unsubscribe()
	require.NoError(t, nc.Flush())

	sv.pub("a", "hello")
	// The store holds one context: src's first envelope is a delta over
	// a's, the others carry their whole context.
	bases, whole := 0, 0
	for range 3 {
		select {
		case env := <-fromSrc:
			if env.GetContextBase() != "" {
				bases++
				continue
			}
			whole++
			kv := map[string]string{}
			for _, p := range env.GetContext() {
				kv[p.GetKey()] = p.GetValue()
			}
			require.Equal(t, "hello", kv["from.src"], "a whole context carries what a set")
		case <-time.After(20 * time.Second):
			t.Fatal("src sent fewer than 3 envelopes")
		}
	}
	require.Equal(t, 1, bases)
	require.Equal(t, 2, whole)
	for range 3 { // b1, b2 and b3, in any order
		ev := sv.wait("node.completed", "")
		for ev.Node == "a" || ev.Node == "src" {
			ev = sv.wait("node.completed", "")
		}
		require.Equal(t, "success", ev.Status, ev.Node)
	}
	require.Zero(t, sv.count("node.refused", ""), "no envelope refused")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[string]string{"b1": "hello", "b2": "hello", "b3": "hello"}, saw)
}
