package pool

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/nodes"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// Dispatcher sends a session's pool work to workers and waits for the
// outcomes. One per session; safe for concurrent firings.
type Dispatcher struct {
	NC       *nats.Conn
	JS       jetstream.JetStream
	Storage  broker.Storage
	Replicas int
	// Key, when set, makes each attempt's reply subject end with a tag
	// only holders of the key can compute (ReplyTag): a worker may publish
	// outcomes, but cannot plant one for an attempt it was not given.
	// Sessions set their id key, which a durable session keeps across
	// owners.
	Key []byte
	// Fresh says the session is new (not resumed, not taken over): jobs
	// and outcomes kept under its id are an earlier session's of the same
	// id, and are purged before its first job (Forget). An owner that
	// resumes or takes a session over keeps them: its predecessor's jobs
	// are its own.
	Fresh bool
	// Clock times the looks into the outcome stream (default: the real one).
	Clock clock.Clock

	mu     sync.Mutex
	ready  bool                    // the streams and the graph bucket exist
	out    jetstream.Stream        // the outcome stream
	work   jetstream.Stream        // the work stream
	graphs map[*graph.Graph]string // graphs stored in the bucket, by hash
	pools  map[string]bool         // pools whose consumer exists
	kv     jetstream.KeyValue
	forgot bool // Forget ran (Fresh)
}

// Forget removes, for a new session (Fresh), what an earlier session of
// the same id left in the work and outcome streams: its jobs still queued
// (a worker would run them under this session's id, for a session that is
// gone) and its outcomes. It runs once, before the session's first job
// (prepare calls it); a session whose graph has pool nodes calls it when it
// starts, so that no earlier job runs beside it. A job a worker runs at
// that moment cannot be stopped: its outcome goes to the earlier session's
// reply subject, which nobody reads (another key, another tag). Streams
// that do not exist hold nothing to forget. It does nothing for a session
// that is not new.
func (d *Dispatcher) Forget(ctx context.Context, session string) error {
	if !d.Fresh {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.forgot {
		return nil
	}
	for _, name := range []string{Stream, OutcomeStream} {
		st := d.work
		if name == OutcomeStream {
			st = d.out
		}
		if st == nil {
			var err error
			if st, err = d.JS.Stream(ctx, name); errors.Is(err, jetstream.ErrStreamNotFound) {
				continue
			} else if err != nil {
				return fmt.Errorf("pool: stream %s: %w", name, err)
			}
		}
		if err := purgeSession(ctx, st, session); err != nil {
			return err
		}
	}
	d.forgot = true
	return nil
}

// ForgetOutcomes purges the outcomes the outcome stream keeps for session:
// called when the session is over (completed, ended, collected), after
// which no owner commits them. A stream that does not exist holds none.
func ForgetOutcomes(ctx context.Context, js jetstream.JetStream, session string) error {
	st, err := js.Stream(ctx, OutcomeStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pool: stream %s: %w", OutcomeStream, err)
	}
	return purgeSession(ctx, st, session)
}

// purgeSession purges session's subjects from the work or outcome stream
// st.
func purgeSession(ctx context.Context, st jetstream.Stream, session string) error {
	subj := "syo." + session + ".>"
	if st.CachedInfo().Config.Name == Stream {
		subj = "syw.*." + session + ".>"
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSubject(subj)); err != nil {
		return fmt.Errorf("pool: stream %s: %w", st.CachedInfo().Config.Name, err)
	}
	return nil
}

// Prepared reports whether the dispatcher got ready for a job (its
// first job's streams were looked up): false, it sent none.
func (d *Dispatcher) Prepared() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ready
}

// publishAttempt bounds one attempt to queue a job.
const publishAttempt = 2 * time.Second

// Handler is the handler of a node whose work goes to pool.
func (d *Dispatcher) Handler(pool string) (nodes.Handler, error) {
	if err := CheckName(pool); err != nil {
		return nil, err
	}
	if d == nil || d.JS == nil {
		return nil, fmt.Errorf("pool %s: worker pools need JetStream on the session's server", pool)
	}
	return nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
		return d.do(ctx, pool, in)
	}), nil
}

// EnsureStream creates (or updates to this configuration) the work stream.
// Each request to the server is bounded by adminAttempt and retried while
// the cluster has no leader to answer it (broker.Retry): a request whose
// answer is lost in a leader election would else wait as long as ctx.
func EnsureStream(ctx context.Context, js jetstream.JetStream, st broker.Storage, replicas int) error {
	storage := jetstream.FileStorage
	if st == broker.MemoryStorage {
		storage = jetstream.MemoryStorage
	}
	if replicas < 1 {
		replicas = 1
	}
	cfg := workStreamConfig(storage, replicas)
	scaled, same := false, false
	s, err := lookStream(ctx, js, Stream)
	if err != nil {
		return fmt.Errorf("pool: stream %s: %w", Stream, err)
	}
	if s != nil {
		had := s.CachedInfo().Config
		cfg.Replicas = max(cfg.Replicas, had.Replicas) // never scale down
		scaled = cfg.Replicas > had.Replicas
		cfg.Storage = had.Storage
		// An operator's duplicate window is kept: it bounds only how long
		// the stream remembers message ids, which decides nothing about
		// whether an attempt's job is queued again (queue looks the job
		// up by its subject).
		cfg.Duplicates = had.Duplicates
		same = sameLimits(had, cfg)
	}
	if !same {
		// Only a stream to make or change is updated: an update that
		// changes nothing races, in nats-server 2.15.2, with a consumer
		// being made on the stream (the race detector caught it).
		err := broker.Retry(ctx, adminAttempt, func(ctx context.Context) error {
			var err error
			s, err = js.CreateOrUpdateStream(ctx, cfg)
			return err
		})
		if err != nil {
			return fmt.Errorf("pool: stream %s: %w", Stream, err)
		}
	}
	if scaled {
		// Scaled up (a worker made it with fewer replicas): until its new
		// peers are current its consumers may be reported missing, and
		// making one fails ("insufficient resources").
		if err := settled(ctx, s, cfg.Replicas); err != nil {
			return err
		}
	}
	out := outcomeStreamConfig(storage, cfg.Replicas)
	o, err := lookStream(ctx, js, OutcomeStream)
	if err != nil {
		return fmt.Errorf("pool: stream %s: %w", OutcomeStream, err)
	}
	if o != nil {
		had := o.CachedInfo().Config
		out.Replicas = max(out.Replicas, had.Replicas)
		out.Storage = had.Storage
		if sameLimits(had, out) {
			return nil
		}
	}
	err = broker.Retry(ctx, adminAttempt, func(ctx context.Context) error {
		_, err := js.CreateOrUpdateStream(ctx, out)
		return err
	})
	if err != nil {
		return fmt.Errorf("pool: stream %s: %w", OutcomeStream, err)
	}
	return nil
}

// adminAttempt bounds one request that makes or looks up a stream, a
// consumer or the graph bucket; broker.Retry sends it again after a
// timeout, within its ride-through.
const adminAttempt = 5 * time.Second

// lookStream is stream name, nil when it does not exist; a lookup with no
// answer is sent again (broker.Retry).
func lookStream(ctx context.Context, js jetstream.JetStream, name string) (jetstream.Stream, error) {
	var s jetstream.Stream
	err := broker.Retry(ctx, adminAttempt, func(ctx context.Context) error {
		var err error
		s, err = js.Stream(ctx, name)
		return err
	})
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	return s, err
}

// workStreamConfig is the configuration EnsureStream asks of SY_WORK.
func workStreamConfig(storage jetstream.StorageType, replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name: Stream, Description: "switchyard: jobs for worker pools",
		Subjects: []string{"syw.>"}, Retention: jetstream.WorkQueuePolicy,
		MaxMsgs: MaxJobs, MaxBytes: MaxJobBytes, Discard: jetstream.DiscardNew,
		Storage: storage, Replicas: replicas,
	}
}

// outcomeStreamConfig is the configuration EnsureStream asks of
// SYW_OUTCOMES.
func outcomeStreamConfig(storage jetstream.StorageType, replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name: OutcomeStream, Description: "switchyard: outcomes of worker jobs, the last of each attempt",
		Subjects: []string{"syo.>"}, MaxMsgsPerSubject: 1, MaxAge: MaxOutcomeAge,
		Discard: jetstream.DiscardOld, Storage: storage, Replicas: replicas,
	}
}

// sameLimits reports whether the stream configured as had already is as
// want asks (what EnsureStream sets).
// The server reports a limit left unset as -1, where the configuration
// asked says 0: both mean none.
func sameLimits(had, want jetstream.StreamConfig) bool {
	unset := func(n int64) int64 { return max(n, 0) }
	return had.Replicas == want.Replicas && had.Storage == want.Storage && had.Retention == want.Retention &&
		had.Discard == want.Discard && unset(had.MaxMsgs) == unset(want.MaxMsgs) &&
		unset(had.MaxBytes) == unset(want.MaxBytes) && had.MaxAge == want.MaxAge &&
		unset(had.MaxMsgsPerSubject) == unset(want.MaxMsgsPerSubject) && slices.Equal(had.Subjects, want.Subjects)
}

// settled waits until stream s has a leader and replicas-1 current peers,
// for up to a minute (then the caller goes on: its requests are retried).
func settled(parent context.Context, s jetstream.Stream, replicas int) error {
	ctx, cancel := context.WithTimeout(parent, time.Minute)
	defer cancel()
	for {
		ictx, icancel := context.WithTimeout(ctx, adminAttempt)
		info, err := s.Info(ictx)
		icancel()
		if err == nil && info.Cluster != nil && info.Cluster.Leader != "" {
			current := 0
			for _, p := range info.Cluster.Replicas {
				if p.Current {
					current++
				}
			}
			if current >= replicas-1 {
				return nil
			}
		}
		t := time.NewTimer(50 * time.Millisecond) // polling the stream's cluster state
		select {
		case <-ctx.Done():
			t.Stop()
			return parent.Err()
		case <-t.C:
		}
	}
}

// graphBucket opens (creating it when asked) the bucket of job graphs.
func graphBucket(ctx context.Context, js jetstream.JetStream, st broker.Storage, replicas int, create bool) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, GraphBucket)
	if err == nil || !create || !errors.Is(err, jetstream.ErrBucketNotFound) {
		return kv, err
	}
	storage := jetstream.FileStorage
	if st == broker.MemoryStorage {
		storage = jetstream.MemoryStorage
	}
	if replicas < 1 {
		replicas = 1
	}
	return js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: GraphBucket, Description: "switchyard: the graphs worker jobs refer to, by SHA-256",
		History: 1, Storage: storage, Replicas: replicas,
	})
}

// prepare makes the stream, the pool's consumer (when it has none: a
// worker may have made it with its own ack wait) and stores g once; it
// returns g's key.
func (d *Dispatcher) prepare(ctx context.Context, session string, g *graph.Graph, pool string, queue bool) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.ready {
		if err := EnsureStream(ctx, d.JS, d.Storage, d.Replicas); err != nil {
			return "", err
		}
		var kv jetstream.KeyValue
		err := broker.Retry(ctx, adminAttempt, func(ctx context.Context) error {
			var err error
			kv, err = graphBucket(ctx, d.JS, d.Storage, d.Replicas, true)
			return err
		})
		if err != nil {
			return "", fmt.Errorf("pool: bucket %s: %w", GraphBucket, err)
		}
		// Retried: a stream just scaled up to more replicas elects its
		// leader first.
		var out, work jetstream.Stream
		err = broker.Retry(ctx, publishAttempt, func(ctx context.Context) error {
			var err error
			if work, err = d.JS.Stream(ctx, Stream); err != nil {
				return err
			}
			out, err = d.JS.Stream(ctx, OutcomeStream)
			return err
		})
		if err != nil {
			return "", fmt.Errorf("pool: streams %s, %s: %w", Stream, OutcomeStream, err)
		}
		if d.Fresh && !d.forgot {
			for _, st := range []jetstream.Stream{work, out} {
				if err := purgeSession(ctx, st, session); err != nil {
					return "", err
				}
			}
			d.forgot = true
		}
		d.kv, d.out, d.work, d.ready, d.graphs, d.pools = kv, out, work, true, map[*graph.Graph]string{}, map[string]bool{}
	}
	if queue && !d.pools[pool] {
		err := broker.Retry(ctx, adminAttempt, func(ctx context.Context) error {
			_, err := d.JS.Consumer(ctx, Stream, ConsumerName(pool))
			return err
		})
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			err = broker.Retry(ctx, adminAttempt, func(ctx context.Context) error {
				_, err := Consumer(ctx, d.JS, pool, 0)
				return err
			})
		}
		if err != nil {
			return "", fmt.Errorf("pool %s: consumer: %w", pool, err)
		}
		d.pools[pool] = true
	}
	if key, ok := d.graphs[g]; ok {
		return key, nil
	}
	dot := g.DOT()
	sum := sha256.Sum256([]byte(dot))
	key := hex.EncodeToString(sum[:])
	err := broker.Retry(ctx, adminAttempt, func(ctx context.Context) error {
		_, err := d.kv.Put(ctx, key, []byte(dot))
		return err
	})
	if err != nil {
		return "", fmt.Errorf("pool: storing the graph for workers: %w", err)
	}
	d.graphs[g] = key
	return key, nil
}

// do publishes one attempt as a job and waits for its first outcome.
func (d *Dispatcher) do(ctx context.Context, pool string, in *nodes.Input) (*nodes.Outcome, error) {
	mode := in.Node.Attrs.String("work_mode")
	if mode != "" && mode != ModeQueue && mode != ModeRequest {
		return nil, fmt.Errorf("node %s: work_mode %q: want queue or request", in.Node.ID, mode)
	}
	key, err := d.prepare(ctx, in.SessionID, in.Graph, pool, mode != ModeRequest)
	if err != nil {
		return nil, err
	}
	job := Job(in, pool, key)
	var data []byte
	if Format(in.Node) == "json" {
		data, err = protojson.Marshal(job)
	} else {
		data, err = proto.Marshal(job)
	}
	if err != nil {
		return nil, fmt.Errorf("pool: encoding the job: %w", err)
	}
	if mode == ModeRequest {
		return d.request(ctx, pool, in, job, data)
	}
	firing := jobFiring(in.AttemptID)
	reply := ReplySubject(in.SessionID, in.Node.ID, firing, in.Attempt)
	if d.Key != nil {
		reply += "." + ReplyTag(d.Key, job.GetId())
	}
	// Listen before publishing: the outcome may come back at once.
	ch := make(chan *nats.Msg, 4)
	sub, err := d.NC.ChanSubscribe(reply, ch)
	if err != nil {
		return nil, fmt.Errorf("pool: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	msg := &nats.Msg{Subject: JobSubject(pool, in.SessionID, in.Node.ID, firing, in.Attempt), Data: data, Header: nats.Header{}}
	msg.Header.Set(ReplyHeader, reply)
	queued, kept, err := d.queue(ctx, msg, job.GetId())
	if err != nil {
		return nil, fmt.Errorf("pool %s: queueing the job: %w", pool, err)
	}
	if kept != nil {
		// This owner took the session over after its predecessor's job
		// ended (or as it ends): its outcome is committed, the job is not
		// queued again.
		if in.Emit != nil {
			in.Emit("work.recovered", map[string]any{"pool": pool, "job": job.GetId()})
		}
		return kept, nil
	}
	if in.Emit != nil {
		kind := "work.queued"
		if !queued {
			// Still in the work stream (queued, running, or to be given
			// again after its worker's loss): its outcome comes to the
			// subscription.
			kind = "work.held"
		}
		in.Emit(kind, map[string]any{"pool": pool, "job": job.GetId()})
	}
	// The outcome comes on the reply subject; one published while this
	// owner's connection was away (its server killed: core NATS keeps
	// nothing for it) is read from the outcome stream, looked at every
	// OutcomePoll.
	clk := d.Clock
	if clk == nil {
		clk = clock.Real()
	}
	poll := clk.NewTimer(OutcomePoll)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-poll.C():
			if o := d.stored(ctx, reply, job.GetId()); o != nil {
				return o, nil
			}
			poll.Reset(OutcomePoll)
		case m := <-ch:
			out, err := DecodeEnvelope(m.Data)
			if err != nil || out.GetId() != job.GetId() || out.GetKind() != KindOutcome {
				// Not this attempt's outcome: refused, the wait goes on.
				if in.Emit != nil {
					why := "not the outcome of " + job.GetId()
					if err != nil {
						why = err.Error()
					}
					in.Emit("work.refused", map[string]any{"pool": pool, "message": why})
				}
				continue
			}
			return FromEnvelope(out), nil
		}
	}
}

// queue stores a job in the work stream under the message id of its
// attempt, unless the attempt is already taken care of; it reports whether
// it stored the job, and the outcome of the attempt when one is kept
// already.
//
// An owner that took the session over fires the node again with the same
// attempt id. Its predecessor's job may still be in the work stream, queued
// or running (a job stays there until a worker acks it) or waiting to be
// given to another worker after its worker died: it is left there, and
// its outcome comes to the attempt's reply subject, where this owner
// listens now. The stream is asked by the job's subject, which is the
// attempt's own, so this holds however old the job is — the stream's
// duplicate window (2 minutes by default) would not catch a job that runs
// longer. Else the job may have run: a worker acks a job only after its
// outcome is stored in the outcome stream, so a job gone from the work
// stream (looked at first) has its outcome kept (looked at second), and
// it is not queued again. Only a job found in neither (its outcome was not
// kept: the outcome stream was missing, or trimmed) is queued again; the
// stream drops a publication with a message id it saw in its duplicate
// window, so the attempt's next message id is used (id, then id~2, id~3...),
// and it runs again with the same attempt id.
//
// Each publication is retried while the stream has no leader — a server
// of the cluster went away, or the stream is being scaled up to the
// session's replicas: a publish may then get no answer at all.
func (d *Dispatcher) queue(ctx context.Context, msg *nats.Msg, id string) (bool, *nodes.Outcome, error) {
	reply := msg.Header.Get(ReplyHeader)
	for n := 1; ; n++ {
		held, err := d.held(ctx, msg.Subject, reply)
		if err != nil {
			return false, nil, err
		}
		// Looked at after the work stream; for a held job too: its worker
		// may have stored the outcome and not acked the job yet.
		if o := d.stored(ctx, reply, id); o != nil || held {
			return false, o, nil
		}
		if n > maxRequeues {
			return false, nil, fmt.Errorf("job %s was queued and run %d times without an outcome reaching its owner", id, maxRequeues)
		}
		msgID := id
		if n > 1 {
			msgID = id + "~" + strconv.Itoa(n)
		}
		var ack *jetstream.PubAck
		err = broker.Retry(ctx, publishAttempt, func(ctx context.Context) error {
			var err error
			ack, err = d.JS.PublishMsg(ctx, msg, jetstream.WithMsgID(msgID))
			return err
		})
		if err != nil {
			return false, nil, err
		}
		if !ack.Duplicate {
			return true, nil, nil
		}
		// A job under this message id was stored within the duplicate
		// window: held still (the next look finds it; so does this one,
		// for a job an owner of an earlier version queued on the node's
		// subject, syw.<pool>.<session>.<node>), or run.
		if held, err := d.heldSeq(ctx, ack.Sequence); err != nil || held {
			return false, nil, err
		}
	}
}

// maxRequeues bounds how many times one attempt's job is queued again.
const maxRequeues = 100

// held reports whether the work stream still holds a job of the attempt
// whose job subject is subject — not acknowledged yet: queued, running, or
// to be given again after its worker's loss. A job on that subject with
// another reply subject is an earlier session's of the same id (another
// key, so another tag): that one's outcome would not reach this owner, and
// it does not count.
func (d *Dispatcher) held(ctx context.Context, subject, reply string) (bool, error) {
	d.mu.Lock()
	st := d.work
	d.mu.Unlock()
	var held bool
	err := broker.Retry(ctx, publishAttempt, func(ctx context.Context) error {
		m, err := st.GetLastMsgForSubject(ctx, subject)
		held = err == nil && m.Header.Get(ReplyHeader) == reply
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			err = nil
		}
		return err
	})
	return held, err
}

// heldSeq reports whether the work stream still holds its message seq.
func (d *Dispatcher) heldSeq(ctx context.Context, seq uint64) (bool, error) {
	d.mu.Lock()
	st := d.work
	d.mu.Unlock()
	var held bool
	err := broker.Retry(ctx, publishAttempt, func(ctx context.Context) error {
		_, err := st.GetMsg(ctx, seq)
		held = err == nil
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			err = nil
		}
		return err
	})
	return held, err
}

// OutcomePoll is how often an owner waiting for a job's outcome looks for
// it in the outcome stream: the outcome it missed while its connection was
// away.
const OutcomePoll = 2 * time.Second

// stored is the outcome of attempt id kept on its reply subject, nil when
// there is none (or it is not that attempt's outcome).
func (d *Dispatcher) stored(ctx context.Context, reply, id string) *nodes.Outcome {
	d.mu.Lock()
	out := d.out
	d.mu.Unlock()
	var m *jetstream.RawStreamMsg
	err := broker.Retry(ctx, publishAttempt, func(ctx context.Context) error {
		var err error
		m, err = out.GetLastMsgForSubject(ctx, reply)
		return err
	})
	if err != nil {
		return nil // none (or the stream is lost: the job is queued)
	}
	env, err := DecodeEnvelope(m.Data)
	if err != nil || env.GetId() != id || env.GetKind() != KindOutcome {
		return nil
	}
	return FromEnvelope(env)
}

// request sends a job as a core NATS request to the pool's responders
// (work_mode=request: nats reply, any service); the reply is the outcome.
// No redelivery: a responder that dies loses the attempt, which fails as
// retryable after the node's timeout (default RequestTimeout).
func (d *Dispatcher) request(ctx context.Context, pool string, in *nodes.Input, job *pb.Envelope, data []byte) (*nodes.Outcome, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, RequestTimeout)
		defer cancel()
	}
	subj := RequestSubject(pool, in.SessionID, in.Node.ID)
	if in.Emit != nil {
		in.Emit("work.requested", map[string]any{"pool": pool, "job": job.GetId()})
	}
	m, err := d.NC.RequestWithContext(ctx, subj, data)
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			err = fmt.Errorf("no worker answers on %s", subj)
		}
		return &nodes.Outcome{Status: nodes.StatusFail, FailureReason: "pool " + pool + ": " + err.Error(), Retryable: true}, nil
	}
	out, err := DecodeEnvelope(m.Data)
	if err != nil {
		return nil, fmt.Errorf("pool %s: the reply on %s: %w", pool, subj, err)
	}
	if (out.GetId() != "" && out.GetId() != job.GetId()) || (out.GetKind() != "" && out.GetKind() != KindOutcome) {
		return nil, fmt.Errorf("pool %s: the reply on %s is not the outcome of %s", pool, subj, job.GetId())
	}
	return FromEnvelope(out), nil
}

// Format is how a node's jobs are encoded: its work_format, else json for
// type=remote and work_mode=request (outside workers), else protobuf.
func Format(n *graph.Node) string {
	if f := n.Attrs.String("work_format"); f != "" {
		return f
	}
	if n.Attrs.String("type") == TypeRemote || n.Attrs.String("work_mode") == ModeRequest {
		return "json"
	}
	return "proto"
}

// jobFiring reads the firing out of an attempt id session/node/firing/attempt.
func jobFiring(attemptID string) uint64 {
	end := len(attemptID)
	slashes := 0
	for i := len(attemptID) - 1; i >= 0; i-- {
		if attemptID[i] == '/' {
			slashes++
			if slashes == 1 {
				end = i
			} else {
				n, _ := strconv.ParseUint(attemptID[i+1:end], 10, 64)
				return n
			}
		}
	}
	return 0
}

// Job is the envelope of one attempt of a firing.
func Job(in *nodes.Input, pool, graphKey string) *pb.Envelope {
	env := &pb.Envelope{
		Id: in.AttemptID, SessionId: in.SessionID, Kind: KindJob, ToNode: in.Node.ID,
		Payload: &pb.Payload{Message: in.Prompt},
		Context: kvs(in.Context),
	}
	msgs := make([]any, 0, len(in.Messages))
	for _, m := range in.Messages {
		msgs = append(msgs, map[string]any{"id": m.ID, "kind": m.Kind, "from": m.From, "edge": m.Edge,
			"text": m.Text, "status": string(m.Status)})
	}
	if st, err := structpb.NewStruct(map[string]any{"messages": msgs}); err == nil {
		env.Payload.Structured = st
	}
	meta := map[string]string{}
	for k, v := range in.Metadata {
		meta[k] = v
	}
	meta["attempt"] = strconv.Itoa(in.Attempt)
	meta["graph"] = graphKey
	meta["node_type"] = in.Type
	meta["pool"] = pool
	env.Metadata = kvs(meta)
	return env
}

// DecodeEnvelope reads an envelope in protobuf or protojson (a body that
// starts with '{': no protobuf envelope does).
func DecodeEnvelope(data []byte) (*pb.Envelope, error) {
	env := &pb.Envelope{}
	var err error
	if len(data) > 0 && data[0] == '{' {
		err = protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(data, env)
	} else {
		err = proto.Unmarshal(data, env)
	}
	if err != nil {
		return nil, fmt.Errorf("pool: not an envelope: %w", err)
	}
	return env, nil
}

// FromEnvelope is the outcome an outcome envelope reports.
func FromEnvelope(env *pb.Envelope) *nodes.Outcome {
	o := env.GetOutcome()
	out := &nodes.Outcome{
		Status: nodes.ParseStatus(o.GetStatus()), PreferredLabel: o.GetPreferredLabel(),
		SuggestedNextIDs: o.GetSuggestedNextIds(), Notes: o.GetNotes(), FailureReason: o.GetFailureReason(),
		Response: env.GetPayload().GetMessage(),
	}
	if out.Status == "" {
		out.Status = nodes.StatusSuccess
	}
	if cu := env.GetContextUpdates(); len(cu) > 0 {
		out.ContextUpdates = make(map[string]string, len(cu))
		for _, kv := range cu {
			out.ContextUpdates[kv.GetKey()] = kv.GetValue()
		}
	}
	if u := env.GetUsage(); u != nil {
		out.Usage = nodes.Usage{InputTokens: u.GetInputTokens(), OutputTokens: u.GetOutputTokens(), Cost: u.GetCost()}
	}
	return out
}

// ToEnvelope is the outcome envelope of job.
func ToEnvelope(job *pb.Envelope, o *nodes.Outcome) *pb.Envelope {
	env := &pb.Envelope{Id: job.GetId(), SessionId: job.GetSessionId(), Kind: KindOutcome, FromNode: job.GetToNode(),
		Payload: &pb.Payload{Message: o.Response},
		Outcome: &pb.Outcome{Status: string(o.Status), PreferredLabel: o.PreferredLabel,
			SuggestedNextIds: o.SuggestedNextIDs, Notes: o.Notes, FailureReason: o.FailureReason},
		ContextUpdates: kvs(o.ContextUpdates),
	}
	if u := o.Usage; u.InputTokens != 0 || u.OutputTokens != 0 || u.Cost != 0 {
		env.Usage = &pb.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, Cost: u.Cost}
	}
	return env
}

func kvs(m map[string]string) []*pb.KV {
	if len(m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]*pb.KV, len(keys))
	for i, k := range keys {
		out[i] = &pb.KV{Key: k, Value: m[k]}
	}
	return out
}
