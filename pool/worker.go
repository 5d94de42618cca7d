package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/nodes"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// DefaultAckWait is how long a job may go without an acknowledgement or an
// in-progress ack before JetStream gives it to another worker.
const DefaultAckWait = 30 * time.Second

// Worker pulls a pool's jobs and runs them with the built-in handlers.
type Worker struct {
	NC          *nats.Conn
	JS          jetstream.JetStream
	Pool        string
	Concurrency int           // jobs at once (default 1)
	AckWait     time.Duration // default DefaultAckWait
	Registry    *nodes.Registry
	WorkDir     string
	Storage     broker.Storage // of the stream, when the worker creates it
	// Replicas of the stream when the worker creates it (default 1; 3 on
	// a cluster: a session scaling it up later stops its jobs for ~10 s).
	Replicas int
	Log      *slog.Logger

	mu     sync.Mutex
	graphs map[string]*graph.Graph
}

// Consumer creates or updates the pool's durable consumer.
func Consumer(ctx context.Context, js jetstream.JetStream, pool string, ackWait time.Duration) (jetstream.Consumer, error) {
	if ackWait <= 0 {
		ackWait = DefaultAckWait
	}
	return js.CreateOrUpdateConsumer(ctx, Stream, jetstream.ConsumerConfig{
		Durable: ConsumerName(pool), Description: "switchyard: the workers of pool " + pool,
		FilterSubject: PoolSubjects(pool), AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: ackWait, MaxDeliver: -1, MaxAckPending: 10_000,
	})
}

// Run serves jobs until ctx ends; jobs running then are finished first. A
// connection that is closed for good (it gave up reconnecting, or its
// owner closed it) ends the worker with nats.ErrConnectionClosed, for its
// supervisor to start it again, wherever the worker is: waiting for the
// work stream or the pool's consumer, or pulling jobs. A worker that waited
// or pulled on it forever would serve nothing.
func (w *Worker) Run(ctx context.Context) error {
	if err := CheckName(w.Pool); err != nil {
		return err
	}
	if w.Concurrency < 1 {
		w.Concurrency = 1
	}
	if w.Log == nil {
		w.Log = slog.Default()
	}
	ctx, stop := untilClosed(ctx, w.NC)
	defer stop()
	closedErr := func(err error) error {
		if errors.Is(context.Cause(ctx), nats.ErrConnectionClosed) {
			return fmt.Errorf("pool %s: %w", w.Pool, nats.ErrConnectionClosed)
		}
		return err
	}
	if err := w.awaitStream(ctx); err != nil {
		return closedErr(err)
	}
	cons, err := w.awaitConsumer(ctx)
	if err != nil {
		return closedErr(fmt.Errorf("pool %s: consumer: %w", w.Pool, err))
	}
	var wg sync.WaitGroup
	for i := 0; i < w.Concurrency; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				m, err := cons.Next(jetstream.FetchMaxWait(time.Second))
				if err != nil {
					if errors.Is(err, nats.ErrConnectionClosed) || w.NC.IsClosed() {
						<-ctx.Done() // untilClosed ends it, with its cause
						return
					}
					if !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, nats.ErrTimeout) && ctx.Err() == nil {
						w.Log.Warn("worker: pull", "pool", w.Pool, "err", err)
						select {
						case <-ctx.Done():
						case <-time.After(time.Second):
						}
					}
					continue
				}
				w.serve(m)
			}
		}()
	}
	wg.Wait()
	return closedErr(nil)
}

// untilClosed returns ctx, also ended (with the cause
// nats.ErrConnectionClosed) when nc is closed for good; stop ends the
// watch and waits for it.
func untilClosed(ctx context.Context, nc *nats.Conn) (_ context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	ch := nc.StatusChanged(nats.CLOSED)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-ch:
			cancel(nats.ErrConnectionClosed)
		case <-ctx.Done():
		}
	}()
	if nc.IsClosed() { // closed before the listener was registered
		cancel(nats.ErrConnectionClosed)
	}
	return ctx, func() {
		cancel(nil)
		wg.Wait()
		nc.RemoveStatusListener(ch)
	}
}

// awaitStream makes sure the work stream exists: it is left as it is when
// it does (an owner made it, maybe replicated); else the worker makes it,
// and a worker whose credential may not (the worker role) waits for the
// first owner that sends a job to make it.
func (w *Worker) awaitStream(ctx context.Context) error {
	said := false
	for {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := w.JS.Stream(lctx, Stream)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			err = EnsureStream(lctx, w.JS, w.Storage, w.Replicas)
		}
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !said {
			w.Log.Warn("worker: waiting for the work stream "+Stream+" (a session with a pool node makes it)", "err", err)
			said = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// awaitConsumer returns the pool's consumer: as it is when it exists with
// this worker's ack wait; else made (or updated) by the worker when its
// credential may; else — the worker role may not make consumers: a
// consumer's configuration could filter other pools' jobs or push them to
// any subject — the one an owner made, whatever its ack wait, waiting for
// the first owner that sends the pool a job to make it.
func (w *Worker) awaitConsumer(ctx context.Context) (jetstream.Consumer, error) {
	ackWait := w.AckWait
	if ackWait <= 0 {
		ackWait = DefaultAckWait
	}
	said := false
	for {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		cons, err := w.JS.Consumer(lctx, Stream, ConsumerName(w.Pool))
		if err == nil && cons.CachedInfo().Config.AckWait == ackWait {
			cancel()
			return cons, nil
		}
		if made, merr := Consumer(lctx, w.JS, w.Pool, ackWait); merr == nil {
			cancel()
			return made, nil
		} else if err == nil {
			cancel()
			w.Log.Warn("worker: the pool's consumer keeps its ack wait (this credential may not change it)",
				"pool", w.Pool, "ack_wait", cons.CachedInfo().Config.AckWait, "err", merr)
			return cons, nil
		}
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !said {
			w.Log.Warn("worker: waiting for the pool's consumer "+ConsumerName(w.Pool)+" (the first owner that sends the pool a job makes it)", "err", err)
			said = true
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// serve runs one job: in-progress acks while it runs, the outcome to the
// job's reply subject, then the ack (the job leaves the stream). The order
// is the protocol's: the outcome is stored (its publish acknowledged by
// the outcome stream) before the job is acked, so an owner that finds the
// job gone from the work stream finds its outcome (Dispatcher.queue), and
// a worker that dies between the two leaves the job to be given again.
func (w *Worker) serve(m jetstream.Msg) {
	job, err := DecodeEnvelope(m.Data())
	reply := m.Headers().Get(ReplyHeader)
	if err != nil || job.GetKind() != KindJob || reply == "" {
		w.Log.Warn("worker: not a job, dropped", "subject", m.Subject(), "err", err)
		_ = m.Term()
		return
	}
	w.Log.Info("worker: job started", "job", job.GetId(), "node", job.GetToNode())
	ackWait := w.AckWait
	if ackWait <= 0 {
		ackWait = DefaultAckWait
	}
	done := make(chan struct{})
	var beat sync.WaitGroup
	beat.Add(1)
	go func() {
		defer beat.Done()
		t := time.NewTicker(ackWait / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = m.InProgress()
			}
		}
	}()
	o := w.run(job)
	close(done)
	beat.Wait()
	out := ToEnvelope(job, o)
	var data []byte
	if m.Data()[0] == '{' {
		data, err = protojson.Marshal(out)
	} else {
		data, err = proto.Marshal(out)
	}
	if err == nil {
		err = w.publish(reply, data)
	}
	if err != nil {
		// No ack: the job is given again after AckWait.
		w.Log.Warn("worker: outcome not sent", "job", job.GetId(), "err", err)
		return
	}
	if err := m.DoubleAck(context.Background()); err != nil {
		w.Log.Warn("worker: ack", "job", job.GetId(), "err", err)
	}
	w.Log.Info("worker: job done", "job", job.GetId(), "status", string(o.Status))
}

// publish sends an outcome: acknowledged by the outcome stream, so that
// it outlives an owner that dies before reading it; with a plain publish
// where that stream does not exist (an owner of an earlier version).
//
// A publication nothing answers (the stream electing a leader after a
// server restart) is made again every 2 s, for up to 30 s: one attempt of
// 30 s held the job — and the worker's stop — that long. "No responders"
// for 5 s in a row is an owner without the stream.
func (w *Worker) publish(reply string, data []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var nobodySince time.Time
	err := broker.Retry(ctx, 2*time.Second, func(ctx context.Context) error {
		_, err := w.JS.Publish(ctx, reply, data)
		if !errors.Is(err, jetstream.ErrNoStreamResponse) && !errors.Is(err, nats.ErrNoResponders) {
			nobodySince = time.Time{}
			return err
		}
		if nobodySince.IsZero() {
			nobodySince = time.Now()
		}
		if time.Since(nobodySince) >= 5*time.Second {
			return errNoOutcomeStream
		}
		return err
	})
	if errors.Is(err, errNoOutcomeStream) {
		if err = w.NC.Publish(reply, data); err == nil {
			err = w.NC.Flush()
		}
	}
	return err
}

// errNoOutcomeStream: nothing stores outcomes (an owner of an earlier
// version); the outcome is published on core NATS only.
var errNoOutcomeStream = errors.New("pool: no outcome stream answers")

// run executes a job with the node's built-in handler.
func (w *Worker) run(job *pb.Envelope) (o *nodes.Outcome) {
	defer func() {
		if r := recover(); r != nil {
			o = &nodes.Outcome{Status: nodes.StatusFail, FailureReason: fmt.Sprintf("worker: handler panicked: %v", r)}
		}
	}()
	fail := func(why string) *nodes.Outcome {
		return &nodes.Outcome{Status: nodes.StatusFail, FailureReason: "worker: " + why}
	}
	meta := map[string]string{}
	for _, kv := range job.GetMetadata() {
		meta[kv.GetKey()] = kv.GetValue()
	}
	g, err := w.graph(meta["graph"])
	if err != nil {
		return fail(err.Error())
	}
	n := g.Node(job.GetToNode())
	if n == nil {
		return fail("the graph has no node " + job.GetToNode())
	}
	typ := meta["node_type"]
	if typ == "" || typ == TypeRemote {
		return fail("node " + n.ID + " is type=remote: it needs a worker of its own (docs/workers.md), not a built-in handler")
	}
	h, ok := w.Registry.Lookup(typ)
	if !ok {
		return fail("no handler for type " + typ)
	}
	in := &nodes.Input{SessionID: job.GetSessionId(), Graph: g, Node: n, Type: typ,
		Context: map[string]string{}, Prompt: job.GetPayload().GetMessage(), WorkDir: w.WorkDir,
		AttemptID: job.GetId(), Metadata: meta}
	for _, kv := range job.GetContext() {
		in.Context[kv.GetKey()] = kv.GetValue()
	}
	_, _ = fmt.Sscan(meta["attempt"], &in.Attempt)
	if st := job.GetPayload().GetStructured(); st != nil {
		if ms, ok := st.AsMap()["messages"].([]any); ok {
			for _, x := range ms {
				if mm, ok := x.(map[string]any); ok {
					s := func(k string) string { v, _ := mm[k].(string); return v }
					in.Messages = append(in.Messages, nodes.Message{ID: s("id"), Kind: s("kind"), From: s("from"),
						Edge: s("edge"), Text: s("text"), Response: s("text"), Status: nodes.Status(s("status"))})
				}
			}
		}
	}
	ctx := context.Background()
	if d, ok := n.Timeout(); ok && d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	out, err := h.Handle(ctx, in)
	if err != nil {
		o := &nodes.Outcome{Status: nodes.StatusFail, FailureReason: err.Error()}
		if out != nil {
			o.Usage = out.Usage
		}
		return o
	}
	if out == nil {
		return fail("handler returned no outcome")
	}
	if out.Status == "" {
		out.Status = nodes.StatusSuccess
	}
	return out
}

// graph reads (once) the graph a job refers to.
func (w *Worker) graph(key string) (*graph.Graph, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if g, ok := w.graphs[key]; ok {
		return g, nil
	}
	if key == "" {
		return nil, errors.New("the job names no graph")
	}
	// Read riding through a server's restart or a leader's election (a
	// cluster losing a server): a single try of 10 s failed the job, and
	// with it the firing, while the bucket's new leader was being elected.
	ctx, cancel := context.WithTimeout(context.Background(), broker.RideThrough+time.Minute)
	defer cancel()
	var e jetstream.KeyValueEntry
	err := broker.Retry(ctx, 10*time.Second, func(ctx context.Context) error {
		kv, err := graphBucket(ctx, w.JS, w.Storage, 1, false)
		if err != nil {
			return fmt.Errorf("graph bucket: %w", err)
		}
		if e, err = kv.Get(ctx, key); err != nil {
			return fmt.Errorf("graph %s: %w", key, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	g, err := graph.Parse(key+".dot", e.Value())
	if err != nil {
		return nil, fmt.Errorf("graph %s: %w", key, err)
	}
	if w.graphs == nil {
		w.graphs = map[string]*graph.Graph{}
	}
	w.graphs[key] = g
	return g, nil
}
