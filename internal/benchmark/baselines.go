package benchmark

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchyard/switchyard/actors"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// hopEnvelope is an envelope of about 430 bytes, like a pipeline hop's.
func hopEnvelope(id string) *pb.Envelope {
	kv := make([]*pb.KV, 0, 8)
	for i := 0; i < 8; i++ {
		kv = append(kv, &pb.KV{Key: "context.key" + strconv.Itoa(i), Value: "a value of some length"})
	}
	return &pb.Envelope{Id: id, SessionId: "bench", Kind: "handoff", FromNode: "a", ToNode: "b", EdgeId: "a.b",
		Iteration: 1, CreatedAt: timestamppb.Now(), Payload: &pb.Payload{Message: "the response of the previous node, a sentence or two long"},
		Outcome: &pb.Outcome{Status: "success"}, Context: kv}
}

var uniq atomic.Int64

// prefix returns a fresh subject prefix for one measurement.
func prefix(what string) string { return "bench." + what + "." + strconv.FormatInt(uniq.Add(1), 10) }

// RawNATSChain is the floor of a pipeline: n core NATS subscribers in a
// line, each decoding the Envelope, re-encoding it and publishing it to the
// next. It returns the median time per hop over passes runs of the line.
func RawNATSChain(ctx context.Context, env *Env, n, passes int) (time.Duration, error) {
	per, err := rawNATSChain(ctx, env, n, passes)
	return time.Duration(median(per)), err
}

// rawNATSChain is RawNATSChain's time per hop of every pass, in ns.
func rawNATSChain(ctx context.Context, env *Env, n, passes int) ([]float64, error) {
	nc, err := env.Broker.NewConn()
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	p := prefix("chain")
	done := make(chan struct{}, 1)
	for i := 0; i < n; i++ {
		next := p + "." + strconv.Itoa(i+1)
		last := i == n-1
		_, err := nc.Subscribe(p+"."+strconv.Itoa(i), func(m *nats.Msg) {
			e := &pb.Envelope{}
			if err := proto.Unmarshal(m.Data, e); err != nil {
				panic(err)
			}
			e.Iteration++
			out, _ := proto.Marshal(e)
			if last {
				done <- struct{}{}
				return
			}
			_ = nc.Publish(next, out)
		})
		if err != nil {
			return nil, err
		}
	}
	if err := nc.Flush(); err != nil {
		return nil, err
	}
	data, _ := proto.Marshal(hopEnvelope("x"))
	var per []float64
	for r := -1; r < passes; r++ { // the first pass warms up
		t0 := time.Now()
		if err := nc.Publish(p+".0", data); err != nil {
			return nil, err
		}
		select {
		case <-done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if r >= 0 {
			per = append(per, float64(time.Since(t0))/float64(n))
		}
	}
	return per, nil
}

// GoChain is an in-process chain of n Go functions passing a message (text
// and metadata, copied as a framework would): the cost of calling a node.
func GoChain(n, passes int) time.Duration {
	type msg struct {
		text string
		meta map[string]string
	}
	fs := make([]func(context.Context, msg) (msg, error), n)
	for i := range fs {
		fs[i] = func(_ context.Context, in msg) (msg, error) {
			return msg{text: in.text, meta: maps.Clone(in.meta)}, nil
		}
	}
	ctx := context.Background()
	var per []float64
	for r := 0; r < passes; r++ {
		m := msg{text: "hello", meta: map[string]string{"k": "v"}}
		t0 := time.Now()
		for _, f := range fs {
			m, _ = f(ctx, m)
		}
		per = append(per, float64(time.Since(t0))/float64(n))
	}
	return time.Duration(median(per))
}

// forward is a protoactor that passes what it receives to the next actor.
type forward struct {
	next *actor.PID
	done chan struct{}
}

func (f *forward) Receive(c actor.Context) {
	if e, ok := c.Message().(*pb.Envelope); ok {
		if f.next == nil {
			f.done <- struct{}{}
			return
		}
		c.Send(f.next, e)
	}
}

// ActorChain is n protoactor actors in a line passing an envelope pointer
// (no encoding): the floor of an in-process actor hop.
func ActorChain(ctx context.Context, n, passes int) (time.Duration, error) {
	sys := newActorSystem()
	defer sys.Shutdown()
	done := make(chan struct{}, 1)
	var next *actor.PID
	for i := n - 1; i >= 0; i-- {
		f := &forward{next: next, done: done}
		next = sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return f }))
	}
	e := hopEnvelope("x")
	var per []float64
	for r := -1; r < passes; r++ { // the first pass warms up
		t0 := time.Now()
		sys.Root.Send(next, e)
		select {
		case <-done:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		if r >= 0 {
			per = append(per, float64(time.Since(t0))/float64(n))
		}
	}
	return time.Duration(median(per)), nil
}

// window bounds how far an outside publisher runs ahead of what was
// processed, the same for every ingest measurement.
const window = 10000

// waitWindow blocks until fewer than window events are unprocessed.
func waitWindow(ctx context.Context, sent int, processed *atomic.Int64) error {
	for sent-int(processed.Load()) >= window {
		if err := ctx.Err(); err != nil {
			return err
		}
		runtime.Gosched()
		time.Sleep(50 * time.Microsecond)
	}
	return nil
}

// waitCount waits until processed reaches n.
func waitCount(ctx context.Context, n int, processed *atomic.Int64) error {
	return waitFor(ctx, func() bool { return int(processed.Load()) >= n },
		func() string { return fmt.Sprintf("%d of %d events processed", processed.Load(), n) })
}

// waitAcked waits until sys holds no delivery unacknowledged (System.Held):
// every firing of what was delivered journaled and its input acknowledged.
func waitAcked(ctx context.Context, sys *actors.System) error {
	return waitFor(ctx, func() bool { return sys.Held() == 0 },
		func() string { return fmt.Sprintf("%d deliveries not acknowledged", sys.Held()) })
}

// waitFor looks every 100 µs whether done, until ctx ends (an error saying
// what was still missing): the end of a measurement, which no event
// announces.
func waitFor(ctx context.Context, done func() bool, what func() string) error {
	for !done() {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%s: %w", what(), err)
		}
		time.Sleep(100 * time.Microsecond)
	}
	return nil
}

// RawNATSIngest is the floor of reactive ingest without persistence: one
// core NATS subscriber decoding every Envelope of n published ones. It
// returns events per second.
func RawNATSIngest(ctx context.Context, env *Env, n int) (float64, error) {
	nc, err := env.Broker.NewConn()
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	subj := prefix("ingest")
	var processed atomic.Int64
	sub, err := nc.Subscribe(subj, func(m *nats.Msg) {
		e := &pb.Envelope{}
		if err := proto.Unmarshal(m.Data, e); err != nil {
			panic(err)
		}
		processed.Add(1)
	})
	if err != nil {
		return 0, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.Flush(); err != nil {
		return 0, err
	}
	t0 := time.Now()
	mk := func(i int) (string, *pb.Envelope) {
		return subj, outsideEnvelope("bench", "x"+strconv.Itoa(i), "a", "a.b", i)
	}
	if err := publishCore(ctx, env, n, mk, &processed); err != nil {
		return 0, err
	}
	if err := waitCount(ctx, n, &processed); err != nil {
		return 0, err
	}
	return float64(n) / time.Since(t0).Seconds(), nil
}

// JetStreamIngest is the floor of durable ingest: n envelopes published
// with a message id (asynchronous acknowledgement) into a file-backed
// stream, consumed by a durable consumer that decodes and acknowledges
// each. It returns events per second.
func JetStreamIngest(ctx context.Context, env *Env, n int) (float64, error) {
	js := env.Broker.JetStream()
	name := "BENCH_" + strconv.FormatInt(uniq.Add(1), 10)
	subj := "bench.js." + name
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subj}, Storage: jetstream.FileStorage})
	if err != nil {
		return 0, err
	}
	defer func() { _ = js.DeleteStream(context.Background(), name) }()
	// Consumed as a session consumes its work stream: the same consumer
	// settings (acknowledgements pending, consumer state in memory on an
	// embedded server) and the same pulls (nats.go's default pull of 500
	// can stall the feed for seconds: actors' pullBatch).
	cfg, pull := actors.ConsumeLike("ingest", env.Broker.Embedded())
	cons, err := st.CreateOrUpdateConsumer(ctx, cfg)
	if err != nil {
		return 0, err
	}
	var processed atomic.Int64
	handle := func(m jetstream.Msg) {
		e := &pb.Envelope{}
		if err := proto.Unmarshal(m.Data(), e); err != nil {
			panic(err)
		}
		_ = m.Ack()
		processed.Add(1)
	}
	cc, err := cons.Consume(handle, pull...)
	if err != nil {
		return 0, err
	}
	// nats.go's Consume sometimes stops asking for messages (its renewal
	// skipped while its previous request was being sent) until its missing
	// heartbeats make it ask again, 4 s later: 2 runs of 12 here, at a
	// third of the rate. A session's watch consumes such a feed again
	// within actors.StallWait (actors/stall.go); so does the floor's, so
	// that neither is measured through that stall.
	// cc is the watch's until it ends (below).
	watchDone, watchStop := make(chan struct{}), make(chan struct{})
	go func() { // ended below
		defer close(watchDone)
		t := time.NewTicker(actors.StallWait)
		defer t.Stop()
		last := int64(-1)
		for {
			select {
			case <-watchStop:
				return
			case <-t.C:
			}
			p := processed.Load()
			if p == last && p < int64(n) {
				if info, err := cons.Info(ctx); err == nil && actors.Stalled(info, uint64(p)) {
					cc.Stop()
					<-cc.Closed()
					if c, err := cons.Consume(handle, pull...); err == nil {
						cc = c
					}
				}
			}
			last = p
		}
	}()
	defer func() {
		close(watchStop)
		<-watchDone
		cc.Stop()
	}()
	t0 := time.Now()
	mk := func(i int) (string, *pb.Envelope) {
		return subj, outsideEnvelope("bench", "bench.in"+strconv.Itoa(i), "", "", i)
	}
	if err := publishJS(ctx, env, n, mk, &processed); err != nil {
		return 0, err
	}
	if err := waitCount(ctx, n, &processed); err != nil {
		return 0, err
	}
	return float64(n) / time.Since(t0).Seconds(), nil
}

// publishJS publishes n outside envelopes through JetStream, each with its
// id as the message id, acknowledged asynchronously, within the window.
func publishJS(ctx context.Context, env *Env, n int, mk func(i int) (string, *pb.Envelope), processed *atomic.Int64) error {
	nc, err := env.Broker.NewConn()
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		if err := waitWindow(ctx, i, processed); err != nil {
			return err
		}
		subj, e := mk(i)
		data, _ := proto.Marshal(e)
		msg := nats.NewMsg(subj)
		msg.Data = data
		msg.Header.Set(nats.MsgIdHdr, e.GetId())
		for {
			_, err := js.PublishMsgAsync(msg)
			if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
				if err != nil {
					return err
				}
				break
			}
			// The server is behind with its acknowledgements: wait for
			// them, then send this one again.
			select {
			case <-js.PublishAsyncComplete():
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		return errors.New("the stream did not acknowledge every publish")
	}
	return nil
}

// publishCore publishes n outside envelopes on core NATS (with their id as
// the message id, as `switchyard pub` does), within the window.
func publishCore(ctx context.Context, env *Env, n int, mk func(i int) (string, *pb.Envelope), processed *atomic.Int64) error {
	nc, err := env.Broker.NewConn()
	if err != nil {
		return err
	}
	defer nc.Close()
	for i := 0; i < n; i++ {
		if err := waitWindow(ctx, i, processed); err != nil {
			return err
		}
		subj, e := mk(i)
		data, _ := proto.Marshal(e)
		msg := nats.NewMsg(subj)
		msg.Data = data
		msg.Header.Set(nats.MsgIdHdr, e.GetId())
		if err := nc.PublishMsg(msg); err != nil {
			return err
		}
	}
	return nc.Flush()
}

// outsideEnvelope is an event as an outside system sends it.
func outsideEnvelope(session, id, from, edge string, i int) *pb.Envelope {
	return &pb.Envelope{Id: id, SessionId: session, Kind: "handoff", FromNode: from, EdgeId: edge,
		CreatedAt: timestamppb.Now(), Payload: &pb.Payload{Message: "event " + strconv.Itoa(i)}}
}

// RawNATSFanOut is the floor of a fan-out: a publish to n subjects whose
// subscribers decode, re-encode and publish to one collector. It returns
// the median time per branch.
func RawNATSFanOut(ctx context.Context, env *Env, n, passes int) (time.Duration, error) {
	per, err := rawNATSFanOut(ctx, env, n, passes)
	return time.Duration(median(per)), err
}

// rawNATSFanOut is RawNATSFanOut's time per branch of every pass, in ns.
func rawNATSFanOut(ctx context.Context, env *Env, n, passes int) ([]float64, error) {
	nc, err := env.Broker.NewConn()
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	p := prefix("fan")
	var got atomic.Int64
	done := make(chan struct{}, 1)
	for i := 0; i < n; i++ {
		_, err := nc.Subscribe(p+"."+strconv.Itoa(i), func(m *nats.Msg) {
			e := &pb.Envelope{}
			_ = proto.Unmarshal(m.Data, e)
			out, _ := proto.Marshal(e)
			_ = nc.Publish(p+".in", out)
		})
		if err != nil {
			return nil, err
		}
	}
	_, err = nc.Subscribe(p+".in", func(m *nats.Msg) {
		e := &pb.Envelope{}
		_ = proto.Unmarshal(m.Data, e)
		if got.Add(1)%int64(n) == 0 {
			done <- struct{}{}
		}
	})
	if err != nil {
		return nil, err
	}
	if err := nc.Flush(); err != nil {
		return nil, err
	}
	var per []float64
	for r := 0; r < passes; r++ {
		t0 := time.Now()
		for i := 0; i < n; i++ {
			data, _ := proto.Marshal(hopEnvelope("f" + strconv.Itoa(i)))
			if err := nc.Publish(p+"."+strconv.Itoa(i), data); err != nil {
				return nil, err
			}
		}
		select {
		case <-done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		per = append(per, float64(time.Since(t0))/float64(n))
	}
	return per, nil
}

func newActorSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
}

type idleActor struct{}

func (idleActor) Receive(actor.Context) {}

// Footprint is what n idle things cost.
type Footprint struct {
	HeapPerNode       float64 // bytes
	GoroutinesPerNode float64
	Start             time.Duration // to create all n
	// MemPerNode adds the goroutine stacks to the heap (bytes).
	MemPerNode float64
}

// ActorIdle spawns n idle protoactor actors: the floor of an idle node.
func ActorIdle(n int) Footprint {
	h0, g0 := heapNow()
	sys := newActorSystem()
	props := actor.PropsFromProducer(func() actor.Actor { return idleActor{} })
	t0 := time.Now()
	for i := 0; i < n; i++ {
		sys.Root.Spawn(props)
	}
	d := time.Since(t0)
	h1, g1 := heapNow()
	sys.Shutdown()
	return Footprint{HeapPerNode: float64(h1-h0) / float64(n), GoroutinesPerNode: float64(g1-g0) / float64(n), Start: d}
}

// heapNow returns the live heap after a collection and the goroutine count.
func heapNow() (int64, int) {
	h, g, _ := memNow()
	return h, g
}

// memNow is heapNow and the memory of goroutine stacks.
func memNow() (heap int64, goroutines int, stacks int64) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc), runtime.NumGoroutine(), int64(ms.StackInuse)
}

// availableMemory is MemAvailable of /proc/meminfo (0 when unknown).
func availableMemory() int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err == nil {
				return kb * 1024
			}
		}
	}
	return 0
}
