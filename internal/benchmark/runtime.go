package benchmark

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/switchyard/switchyard"
	"github.com/switchyard/switchyard/actors"
	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/nodes"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

// echo is the Go agent of the chains: it passes its input on.
var echo = switchyard.AgentFunc(func(_ context.Context, in switchyard.Message) (switchyard.Message, error) {
	return switchyard.Message{Text: in.Text}, nil
})

// chainGraph is start → n0 → … → n(n-1) → exit of Go agents.
func chainGraph(n int) *switchyard.Graph {
	lim := strconv.Itoa(2*n + 100)
	g := switchyard.New("chain", switchyard.GraphAttr("max_iterations", lim))
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "n" + strconv.Itoa(i)
		g.Agent(ids[i], echo)
	}
	return g.Chain(ids...)
}

// Chain runs a pipeline of n Go agents through switchyard.Run passes
// times (durable: with checkpoints, the default; else
// WithoutCheckpoints) and returns the median wall time per node.
func Chain(ctx context.Context, env *Env, n, passes int, durable bool) (time.Duration, error) {
	per, err := chain(ctx, env, n, passes, durable)
	return time.Duration(median(per)), err
}

// ChainNamed is Chain of durable Runs each under a session id of its
// caller's (chainNamed).
func ChainNamed(ctx context.Context, env *Env, n, passes int) (time.Duration, error) {
	per, err := chainNamed(ctx, env, n, passes)
	return time.Duration(median(per)), err
}

// chain is Chain's wall time per node of every pass, in ns.
func chain(ctx context.Context, env *Env, n, passes int, durable bool) ([]float64, error) {
	return chainRuns(ctx, env, n, passes, durable, false)
}

// chainNamed is chain of durable Runs each given its own session id
// (WithSessionID): none takes a store prepared ahead (session's prepared
// stores), so each makes its store and removes it on its critical path,
// as a process's first Run does.
func chainNamed(ctx context.Context, env *Env, n, passes int) ([]float64, error) {
	return chainRuns(ctx, env, n, passes, true, true)
}

// namedRuns numbers chainNamed's session ids.
var namedRuns atomic.Int64

func chainRuns(ctx context.Context, env *Env, n, passes int, durable, named bool) ([]float64, error) {
	g := chainGraph(n)
	if _, err := g.Build(); err != nil {
		return nil, err
	}
	opts := []switchyard.Option{switchyard.WithBroker(env.Broker)}
	if !durable {
		opts = append(opts, switchyard.WithoutCheckpoints())
	}
	var per []float64
	for r := 0; r < passes; r++ {
		runOpts := opts
		if named {
			runOpts = append(opts[:len(opts):len(opts)], switchyard.WithSessionID("bench-named-"+strconv.FormatInt(namedRuns.Add(1), 10)))
		}
		t0 := time.Now()
		rep, err := switchyard.Run(ctx, g, switchyard.Message{Text: "hello"}, runOpts...)
		if err != nil {
			return nil, err
		}
		if rep.Status != "success" {
			return nil, fmt.Errorf("run ended %s: %s", rep.Status, rep.Reason)
		}
		per = append(per, float64(time.Since(t0))/float64(n))
	}
	return per, nil
}

// FanOut runs start → parallel → n branches → fan-in → exit passes times
// and returns the median wall time per branch.
func FanOut(ctx context.Context, env *Env, n, passes int, durable bool) (time.Duration, error) {
	per, err := fanOut(ctx, env, n, passes, durable)
	return time.Duration(median(per)), err
}

// fanOut is FanOut's wall time per branch of every pass, in ns.
func fanOut(ctx context.Context, env *Env, n, passes int, durable bool) ([]float64, error) {
	g := switchyard.New("fan")
	g.Node("p", graph.KV{"shape": "component"})
	g.Node("f", graph.KV{"shape": "tripleoctagon"})
	for i := 0; i < n; i++ {
		id := "b" + strconv.Itoa(i)
		g.Agent(id, echo)
		g.Edge("p", id)
		g.Edge(id, "f")
	}
	opts := []switchyard.Option{switchyard.WithBroker(env.Broker)}
	if !durable {
		opts = append(opts, switchyard.WithoutCheckpoints())
	}
	var per []float64
	for r := 0; r < passes; r++ {
		t0 := time.Now()
		rep, err := switchyard.Run(ctx, g, switchyard.Message{Text: "hello"}, opts...)
		if err != nil {
			return nil, err
		}
		if rep.Status != "success" {
			return nil, fmt.Errorf("run ended %s: %s", rep.Status, rep.Reason)
		}
		per = append(per, float64(time.Since(t0))/float64(n))
	}
	return per, nil
}

// Delivery is an ingest case's shape.
type Delivery string

// The ingest cases.
const (
	Queue  Delivery = "queue"  // src -> sink [delivery=queue]: every event fires sink
	Latest Delivery = "latest" // src -> sink [delivery=latest]: sink sees the newest
	Join3  Delivery = "join3"  // a, b, c -> sink [trigger=all]: events round-robin
)

const sinkType = "bench.sink"

// ingestGraph is the reactive session of an ingest case and its edges.
func ingestGraph(d Delivery) (string, []string) {
	switch d {
	case Latest:
		return `digraph ingest { kind="session"; stall_after=0; max_visits=1000000000; max_iterations=1000000000
			src [type="bench.sink"]; sink [type="bench.sink"]
			src -> sink [delivery=latest] }`, []string{"src.sink"}
	case Join3:
		return `digraph ingest { kind="session"; stall_after=0; max_visits=1000000000; max_iterations=1000000000
			a [type="bench.sink"]; b [type="bench.sink"]; c [type="bench.sink"]; sink [type="bench.sink", trigger=all]
			a -> sink; b -> sink; c -> sink }`, []string{"a.sink", "b.sink", "c.sink"}
	default:
		return `digraph ingest { kind="session"; stall_after=0; max_visits=1000000000; max_iterations=1000000000
			src [type="bench.sink"]; sink [type="bench.sink"]
			src -> sink }`, []string{"src.sink"}
	}
}

// sinkRegistry returns a registry whose bench.sink handler records, in
// progress, one past the highest event index it has seen (queue and join:
// the number of events seen).
func sinkRegistry(d Delivery, progress *atomic.Int64) (*nodes.Registry, error) {
	reg := nodes.NewRegistry()
	if err := nodes.RegisterBuiltins(reg, nodes.Deps{}); err != nil {
		return nil, err
	}
	h := nodes.HandlerFunc(func(_ context.Context, in *nodes.Input) (*nodes.Outcome, error) {
		if d == Latest {
			for _, m := range in.Messages {
				i, _ := strconv.Atoi(strings.TrimPrefix(m.Text, "event "))
				for {
					cur := progress.Load()
					if int64(i+1) <= cur || progress.CompareAndSwap(cur, int64(i+1)) {
						break
					}
				}
			}
		} else {
			progress.Add(int64(len(in.Messages)))
		}
		return &nodes.Outcome{Status: nodes.StatusSuccess}, nil
	})
	return reg, reg.Register(nodes.Info{Type: sinkType, Handler: h})
}

// Ingest publishes n outside events onto the edges of a reactive session
// (through JetStream with a message id when durable, else core NATS, both
// as `switchyard pub` would) and returns the events per second processed
// by the sink node.
func Ingest(ctx context.Context, env *Env, d Delivery, n int, durable bool) (float64, error) {
	return ingest(ctx, env, d, n, durable, 0)
}

// IngestLarge is Ingest into a durable session whose graph has more
// inbound subjects than a work stream lists (broker.MaxListedSubjects: the
// graph also has that many idle nodes), so every outside envelope passes
// through the session's intake before its stream stores it.
func IngestLarge(ctx context.Context, env *Env, d Delivery, n int) (float64, error) {
	return ingest(ctx, env, d, n, true, broker.MaxListedSubjects)
}

func ingest(ctx context.Context, env *Env, d Delivery, n int, durable bool, idle int) (float64, error) {
	src, edges := ingestGraph(d)
	if idle > 0 {
		var b strings.Builder
		for i := range idle {
			fmt.Fprintf(&b, "idle%d [type=%q]\n", i, sinkType)
		}
		src = strings.TrimSuffix(strings.TrimSpace(src), "}") + b.String() + "}"
	}
	n -= n % len(edges)
	g, diags := graph.Load("ingest.dot", []byte(src), graph.WithKnownTypes(append(graph.BuiltinTypes, sinkType)...))
	if diags.HasErrors() {
		return 0, diags.Err()
	}
	var progress atomic.Int64
	reg, err := sinkRegistry(d, &progress)
	if err != nil {
		return 0, err
	}
	s, err := session.Start(ctx, session.Config{Graph: g, Broker: env.Broker, Registry: reg, Durable: durable,
		Checkpoint: &session.CheckpointPolicy{}})
	if err != nil {
		return 0, err
	}
	defer s.Stop()
	sid := s.ID()
	mk := func(i int) (string, *pb.Envelope) {
		e := edges[i%len(edges)]
		from, _, _ := strings.Cut(e, ".")
		return broker.Edge(sid, e), outsideEnvelope(sid, sid+".ext"+strconv.Itoa(i), from, e, i)
	}
	t0 := time.Now()
	if durable {
		err = publishJS(ctx, env, n, mk, &progress)
	} else {
		err = publishCore(ctx, env, n, mk, &progress)
	}
	if err != nil {
		return 0, err
	}
	if err := waitCount(ctx, n, &progress); err != nil {
		return 0, fmt.Errorf("%w; %s", err, stuckState(env, s))
	}
	if durable {
		// Every event handled is not every event done: a durable firing's
		// input is acknowledged once its record is stored, and the
		// baseline's clock stops at its last acknowledgement.
		if err := waitAcked(ctx, s.System()); err != nil {
			return 0, fmt.Errorf("%w; %s", err, stuckState(env, s))
		}
	}
	rate := float64(n) / time.Since(t0).Seconds()
	if durable {
		// Stopped first: a session whose store is deleted under it rides
		// through the missing bucket while it writes its last records
		// (minutes), which the next measurement would share the machine
		// with.
		s.Stop()
		_ = broker.DeleteSession(context.Background(), env.Broker.JetStream(), sid)
	}
	return rate, nil
}

// stuckState says where an ingest that stopped making progress stands:
// what the session holds, the sink's gate and buffers (as `switchyard
// explain` says them), durable, what the session's consumer has
// delivered and what waits in its stream, and the file it wrote every
// goroutine's stack to. (A durable latest-edge ingest stopped once at
// 99,097 of 100,000 events for five minutes in a full run and not again
// in about a hundred more: performance.md, twenty-first round.)
func stuckState(env *Env, s *session.Session) string {
	sys := s.System()
	ex := sys.Explain("sink")
	var b strings.Builder
	fmt.Fprintf(&b, "the session holds %d deliveries unacknowledged; sink: %s", sys.Held(), strings.TrimSpace(ex.Explain))
	if js := env.Broker.JetStream(); js != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if c, err := js.Consumer(ctx, broker.StreamName(s.ID()), actors.ConsumerName); err == nil {
			if ci, err := c.Info(ctx); err == nil {
				fmt.Fprintf(&b, "; consumer: delivered stream seq %d, ack floor %d, %d pending in the stream, %d unacknowledged, %d waiting pulls",
					ci.Delivered.Stream, ci.AckFloor.Stream, ci.NumPending, ci.NumAckPending, ci.NumWaiting)
			}
		}
	}
	// Where every goroutine waits, in a file of its own (hundreds of
	// lines): a node whose mailbox or runner stopped shows there.
	if f, err := os.CreateTemp("", "switchyard-bench-stuck-*.txt"); err == nil {
		werr := pprof.Lookup("goroutine").WriteTo(f, 1)
		if cerr := f.Close(); werr == nil && cerr == nil {
			fmt.Fprintf(&b, "; goroutines: %s", f.Name())
		}
	}
	return b.String()
}

// IdleSession starts a reactive session of n nodes that nothing reaches
// and returns what they cost: heap and goroutines per node once started,
// and the time session.Start took.
func IdleSession(ctx context.Context, env *Env, n int, durable bool) (Footprint, error) {
	var b strings.Builder
	b.WriteString(`digraph idle { kind="session"; stall_after=0; max_visits=1000000000; max_iterations=1000000000` + "\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "n%d [type=%q]\n", i, sinkType)
	}
	b.WriteString("}\n")
	g, diags := graph.Load("idle.dot", []byte(b.String()), graph.WithKnownTypes(append(graph.BuiltinTypes, sinkType)...))
	if diags.HasErrors() {
		return Footprint{}, diags.Err()
	}
	var progress atomic.Int64
	reg, err := sinkRegistry(Queue, &progress)
	if err != nil {
		return Footprint{}, err
	}
	h0, g0, st0 := memNow()
	t0 := time.Now()
	s, err := session.Start(ctx, session.Config{Graph: g, Broker: env.Broker, Registry: reg, Durable: durable,
		Checkpoint: &session.CheckpointPolicy{}})
	if err != nil {
		return Footprint{}, err
	}
	d := time.Since(t0)
	h1, g1, st1 := memNow()
	s.Stop()
	if durable {
		_ = broker.DeleteSession(context.Background(), env.Broker.JetStream(), s.ID())
	}
	return Footprint{HeapPerNode: float64(h1-h0) / float64(n), GoroutinesPerNode: float64(g1-g0) / float64(n), Start: d,
		MemPerNode: float64(h1-h0+st1-st0) / float64(n)}, nil
}
