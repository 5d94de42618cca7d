package session_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/nodes"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

// waits is a pipeline whose node a runs custom.wait (run.waitFor).
const waits = `digraph w { start [shape=Mdiamond]; a [type="custom.wait"]; exit [shape=Msquare]; start -> a -> exit }`

const preparedPipeline = `digraph p { start [shape=Mdiamond]; a [prompt="a"]; exit [shape=Msquare]; start -> a -> exit }`

// storeNames lists the sessions whose entries the store holds — in a
// bucket of their own or in the shared bucket — and the work streams.
func storeNames(t *testing.T, b *broker.Broker) (stores, streams []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kvs := b.JetStream().KeyValueStoreNames(ctx)
	for name := range kvs.Name() {
		if id, ok := strings.CutPrefix(name, broker.KVName("")); ok {
			stores = append(stores, id)
		}
	}
	require.NoError(t, kvs.Error())
	shared, err := broker.SharedSessions(ctx, b.JetStream())
	require.NoError(t, err)
	stores = append(stores, shared...)
	sts := b.JetStream().StreamNames(ctx)
	for name := range sts.Name() {
		if strings.HasPrefix(name, broker.StreamName("")) && name != "SY_WORK" {
			streams = append(streams, name)
		}
	}
	require.NoError(t, sts.Err())
	return stores, streams
}

// burst runs two durable pipelines one after the other, which makes the
// broker prepare the next one's store, and returns that store's id.
func burst(t *testing.T, r *run) string {
	t.Helper()
	for range 2 {
		cfg := r.durable(preparedPipeline, "")
		cfg.Checkpoint = &session.CheckpointPolicy{}
		require.Equal(t, "success", r.runConfig(cfg).Status)
	}
	id := session.PreparedNext(r.broker)
	require.NotEmpty(t, id, "a burst of two starts prepares the next one's store")
	return id
}

// latePipeline holds in a, while b reads what outside clients send it.
const latePipeline = `digraph p { start [shape=Mdiamond]; a [type="custom.hold"]; b [type="custom.seen"]; exit [shape=Msquare]; start -> a -> b -> exit }`

// lateRun is a run (on the store in dir, or a new one when dir is "")
// whose node a holds until its session stops, and whose node b reports
// what it reads from outside, then holds as well: a success would
// complete the session, and remove its store.
func lateRun(t *testing.T, dir string, started chan<- struct{}, seen chan<- string) *run {
	var opts []brokertest.Option
	if dir != "" {
		opts = append(opts, brokertest.Configure(func(c *broker.Config) { c.DataDir = dir }))
	}
	r := newRun(t, opts...)
	r.reg = func(reg *nodes.Registry) {
		_ = reg.Register(nodes.Info{Type: "custom.hold", Handler: nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
			started <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		})})
		_ = reg.Register(nodes.Info{Type: "custom.seen", Handler: nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
			for _, m := range in.Messages {
				if m.From == "" {
					seen <- m.Text
				}
			}
			<-ctx.Done()
			return nil, ctx.Err()
		})})
	}
	return r
}

// publishOutside publishes an envelope of text on subject with message id
// msgID, as an outside client does, and waits for the stream's
// acknowledgement.
func publishOutside(ctx context.Context, t *testing.T, b *broker.Broker, subject, msgID, text string) (*jetstream.PubAck, error) {
	t.Helper()
	data, err := proto.Marshal(&pb.Envelope{Id: msgID, Kind: "handoff", Payload: &pb.Payload{Message: text}})
	require.NoError(t, err)
	return b.JetStream().Publish(ctx, subject, data, jetstream.WithMsgID(msgID))
}

// TestPreparedStoresInABurst: a process that starts durable pipelines one
// after another has each next one's store made ahead. The first two starts
// make their own; the second prepares the third's, which takes it (its id
// is the prepared store's), runs to its end and is removed like any other;
// the broker's Close removes the store prepared for a fourth, so the store
// is left with no session, recorded or not.
func TestPreparedStoresInABurst(t *testing.T) {
	defer session.SetPreparedBurst(time.Minute)()
	dir := t.TempDir()
	r := newRun(t, brokertest.Configure(func(c *broker.Config) { c.DataDir = dir }))
	start := func() *session.Session {
		cfg := r.durable(preparedPipeline, "")
		cfg.Checkpoint = &session.CheckpointPolicy{}
		s, rep := r.runSession(cfg)
		require.Equal(t, "success", rep.Status, rep.Reason)
		return s
	}
	s1 := start()
	require.False(t, session.TookPrepared(s1))
	require.Empty(t, session.PreparedNext(r.broker), "one start prepares nothing")
	s2 := start()
	require.False(t, session.TookPrepared(s2))
	next := session.PreparedNext(r.broker)
	require.NotEmpty(t, next, "the second start of a burst prepares the third's store")
	buckets, streams := storeNames(t, r.broker)
	require.Contains(t, buckets, next)
	shared, err := broker.SharedSessions(context.Background(), r.broker.JetStream())
	require.NoError(t, err)
	require.Contains(t, shared, next, "a prepared store is made in the shared bucket")
	require.NotContains(t, streams, broker.StreamName(next), "a prepared store has no work stream (made when outside input comes)")
	s3 := start()
	require.True(t, session.TookPrepared(s3))
	require.Equal(t, next, s3.ID(), "the third start took the prepared store, id and all")
	fourth := session.PreparedNext(r.broker)
	require.NotEmpty(t, fourth)
	require.NotEqual(t, next, fourth)

	// An explicit id, another clock: the prepared store is not theirs.
	cfg := r.durable(preparedPipeline, "named")
	cfg.Checkpoint = &session.CheckpointPolicy{}
	rep := r.runConfig(cfg)
	require.Equal(t, "success", rep.Status)
	require.Equal(t, fourth, session.PreparedNext(r.broker), "still there for the next generated id")

	require.NoError(t, r.broker.Close())
	b := brokertest.Start(t, brokertest.Configure(func(c *broker.Config) { c.DataDir = dir }))
	buckets, streams = storeNames(t, b)
	require.Empty(t, buckets, "every session's store removed, and the one prepared for a fourth start")
	require.Empty(t, streams)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := session.List(ctx, b)
	require.NoError(t, err)
	require.Empty(t, list)
}

// TestPreparedStoreMakesItsStreamLate: a pipeline on a prepared store
// runs without a work stream — its input and hops are handed in process —
// and `serve` finds it running all the same (Running reads its bucket).
// Its intake refuses what no node reads without making one. The first
// outside envelope it accepts makes the stream, storing the session's
// Stored subjects; the publisher gets the stream's acknowledgement, the
// node reads the envelope, and a repeated publish is stored once.
// Stopped before its end, the session lists its inbound subjects, so what
// an outside client publishes while no process serves it is stored and
// acknowledged.
func TestPreparedStoreMakesItsStreamLate(t *testing.T) {
	defer session.SetPreparedBurst(time.Minute)()
	started, seen := make(chan struct{}, 1), make(chan string, 4)
	r := lateRun(t, "", started, seen)
	id := burst(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := session.Start(ctx, r.durable(latePipeline, ""))
	require.NoError(t, err)
	defer s.Stop()
	require.Equal(t, id, s.ID())
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("node a never started")
	}
	js := r.broker.JetStream()
	noStream := func(why string) {
		t.Helper()
		_, err := js.Stream(ctx, broker.StreamName(id))
		require.True(t, errors.Is(err, jetstream.ErrStreamNotFound), "%s: %v", why, err)
	}
	noStream("its input handed in process")
	running, err := session.Running(ctx, r.broker)
	require.NoError(t, err)
	require.Len(t, running, 1, "a running session without a work stream")
	require.Equal(t, id, running[0].ID)

	// An inbox the graph does not have is refused by the intake, and
	// makes no stream.
	publish := func(subject, msgID, text string) (*jetstream.PubAck, error) {
		return publishOutside(ctx, t, r.broker, subject, msgID, text)
	}
	_, err = publish(broker.NodeIn(id, "nope"), "outside-0", "no one")
	require.Error(t, err, "no node nope")
	noStream("after a refusal")

	// The first envelope accepted makes it; a repeat is stored once.
	for range 2 {
		ack, err := publish(broker.NodeIn(id, "b"), "outside-1", "hello b")
		require.NoError(t, err)
		require.Equal(t, broker.StreamName(id), ack.Stream)
	}
	require.Equal(t, []string{broker.AllStored(id)}, streamSubjects(t, js, id), "made by the intake, in ingress mode")
	select {
	case got := <-seen:
		require.Equal(t, "hello b", got)
	case <-ctx.Done():
		t.Fatal("node b never read the outside envelope")
	}

	st, err := js.Stream(ctx, broker.StreamName(id))
	require.NoError(t, err)
	info, err := st.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), info.State.Msgs, "the repeated publish stored once")

	s.Stop()
	subjects := streamSubjects(t, js, id)
	require.Contains(t, subjects, broker.NodeIn(id, "a"), "left unfinished: the stream lists its inboxes")
	require.NotContains(t, subjects, broker.AllStored(id))
	ack, err := publish(broker.NodeIn(id, "a"), "outside-2", "later")
	require.NoError(t, err, "stored while nobody serves it")
	require.Equal(t, broker.StreamName(id), ack.Stream)
}

// TestPreparedStoreListedWhenLeftUnfinished: a pipeline on a prepared
// store that got no outside input has no work stream; stopped before its
// end, it has one made listing its inbound subjects, so that what an
// outside client publishes while no process serves it is stored and
// acknowledged.
func TestPreparedStoreListedWhenLeftUnfinished(t *testing.T) {
	defer session.SetPreparedBurst(time.Minute)()
	r := newRun(t)
	started := make(chan struct{}, 1)
	r.reg = func(reg *nodes.Registry) {
		_ = reg.Register(nodes.Info{Type: "custom.echo", Handler: nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
			started <- struct{}{}
			<-ctx.Done() // until the session stops
			return nil, ctx.Err()
		})})
	}
	id := burst(t, r)
	cfg := r.durable(`digraph p { start [shape=Mdiamond]; a [type="custom.echo"]; exit [shape=Msquare]; start -> a -> exit }`, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := session.Start(ctx, cfg)
	require.NoError(t, err)
	require.Equal(t, id, s.ID())
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("node a never started")
	}
	js := r.broker.JetStream()
	_, err = js.Stream(ctx, broker.StreamName(id))
	require.True(t, errors.Is(err, jetstream.ErrStreamNotFound), "%v", err)

	s.Stop()
	subjects := streamSubjects(t, js, id)
	require.Contains(t, subjects, broker.NodeIn(id, "a"), "left unfinished: the stream lists its inboxes")
	require.NotContains(t, subjects, broker.AllStored(id))
	ack, err := publishOutside(ctx, t, r.broker, broker.NodeIn(id, "a"), "outside-1", "hello")
	require.NoError(t, err, "stored while nobody serves it")
	require.Equal(t, broker.StreamName(id), ack.Stream)
}

// TestGCRemovesUnrecordedStores: `gc` removes what no session recorded
// and no live process holds — a start killed before it recorded its
// session, a killed process's prepared store, an artifact uploaded for a
// session whose store is gone — and leaves a live process's prepared
// store alone.
func TestGCRemovesUnrecordedStores(t *testing.T) {
	defer session.SetPreparedBurst(time.Minute)()
	r := newRun(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js := r.broker.JetStream()
	_, err := broker.SessionKV(ctx, js, "orphan", r.broker.Storage())
	require.NoError(t, err)
	_, err = broker.EnsureSessionStream(ctx, js, "orphan", r.broker.Storage())
	require.NoError(t, err)
	// A work stream alone: a start killed after it made its stream,
	// before its bucket (the two are made side by side).
	_, err = broker.EnsureSessionStream(ctx, js, "early", r.broker.Storage())
	require.NoError(t, err)
	// Keys in the shared bucket that no session recorded: what a process
	// killed with a store prepared there left.
	skv, err := broker.SharedKV(ctx, js, r.broker.Storage(), 1)
	require.NoError(t, err)
	_, err = (&broker.SessionBucket{KV: skv, Prefix: "sharedorphan."}).Put(ctx, broker.OwnerKey, []byte(`{}`))
	require.NoError(t, err)
	// An upload (`switchyard pub --file`) whose envelope never reached its
	// session: the session's removal left no object store behind it
	// (broker.NoObjects), this one came after.
	_, err = broker.PutArtifact(ctx, js, "uploaded", "inbox/e1/notes.txt", "file", []byte("notes"), r.broker.Storage())
	require.NoError(t, err)
	// Not a work stream, though its name starts as one's: left alone.
	_, err = broker.EnsureEventStream(ctx, js, "watched", r.broker.Storage(), broker.EventRetention{})
	require.NoError(t, err)
	live := burst(t, r)

	removed, err := session.GC(ctx, r.broker, time.Hour, time.Now(), false)
	require.NoError(t, err)
	require.Empty(t, removed, "no recorded session was old enough")
	buckets, streams := storeNames(t, r.broker)
	require.NotContains(t, buckets, "orphan")
	require.NotContains(t, buckets, "sharedorphan")
	require.NotContains(t, streams, broker.StreamName("orphan"))
	require.NotContains(t, streams, broker.StreamName("early"), "a work stream without its bucket")
	_, err = js.Stream(ctx, "OBJ_"+broker.ObjectsName("uploaded"))
	require.ErrorIs(t, err, jetstream.ErrStreamNotFound, "an object store without its session")
	_, err = js.Stream(ctx, broker.EventStreamName("watched"))
	require.NoError(t, err, "an event stream is no session's leftover")
	require.Contains(t, buckets, live, "held by this live process")
	_, err = js.Stream(ctx, broker.StreamName("orphan"))
	require.True(t, errors.Is(err, jetstream.ErrStreamNotFound), "%v", err)
}

// TestPreparedStoreResumes: a pipeline that took a prepared store and was
// interrupted resumes like any other: its stream lists its subjects and it
// runs to its end.
func TestPreparedStoreResumes(t *testing.T) {
	defer session.SetPreparedBurst(time.Minute)()
	r := newRun(t)
	block := make(chan struct{})
	started := make(chan struct{}, 1)
	r.reg = func(reg *nodes.Registry) {
		_ = reg.Register(nodes.Info{Type: "custom.echo", Handler: nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
			select {
			case <-block: // the resume's firing
				return &nodes.Outcome{Status: nodes.StatusSuccess, Response: "done"}, nil
			default:
			}
			started <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		})})
	}
	burst(t, r)
	before := len(r.visits())
	src := `digraph p { start [shape=Mdiamond]; a [type="custom.echo"]; exit [shape=Msquare]; start -> a -> exit }`
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := session.Start(ctx, r.durable(src, ""))
	require.NoError(t, err)
	require.True(t, session.TookPrepared(s))
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("node a never started")
	}
	s.Stop()
	close(block)
	cfg := r.durable(src, s.ID())
	s2, err := session.Resume(ctx, cfg)
	require.NoError(t, err)
	rep, err := s2.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status, rep.Reason)
	require.Equal(t, []string{"start", "a", "exit"}, r.visits()[before:], "start ran once, a's interrupted firing again, then exit")
}

// TestPreparedStoreRenewedWhileItWaits: a prepared store's lease is
// renewed while no start takes it, like a running session's, so `gc`
// leaves it alone however long it waits, and the next start takes it.
func TestPreparedStoreRenewedWhileItWaits(t *testing.T) {
	defer session.SetPreparedBurst(time.Minute)()
	r := newRun(t)
	id := burst(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	leases, _, err := r.broker.Leases(ctx, 1)
	require.NoError(t, err)
	w, err := leases.Watch(ctx, id, jetstream.UpdatesOnly())
	require.NoError(t, err)
	defer func() { _ = w.Stop() }()
	select {
	case e := <-w.Updates(): // a third of the lease's TTL later
		require.NotNil(t, e)
		require.Equal(t, jetstream.KeyValuePut, e.Operation(), "renewed, not released")
	case <-ctx.Done():
		t.Fatal("the prepared store's lease was never renewed")
	}
	_, err = session.GC(ctx, r.broker, time.Hour, time.Now(), false)
	require.NoError(t, err)
	buckets, _ := storeNames(t, r.broker)
	require.Contains(t, buckets, id, "held: gc leaves it alone")
	cfg := r.durable(preparedPipeline, "")
	cfg.Checkpoint = &session.CheckpointPolicy{}
	s, err := session.Start(ctx, cfg)
	require.NoError(t, err)
	require.Equal(t, id, s.ID(), "taken after its renewals")
	rep, err := s.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status)
}

// TestPreparedStoreStreamMadeLateRemoved: a pipeline on a prepared store
// whose work stream was made for outside input, and that then runs to
// its end, has its whole store removed, that stream with it.
func TestPreparedStoreStreamMadeLateRemoved(t *testing.T) {
	defer session.SetPreparedBurst(time.Minute)()
	dir := t.TempDir()
	r := newRun(t, brokertest.Configure(func(c *broker.Config) { c.DataDir = dir }))
	r.reg = func(reg *nodes.Registry) {
		_ = reg.Register(nodes.Info{Type: "custom.hold", Handler: nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
			<-ctx.Done() // until the session ends
			return nil, ctx.Err()
		})})
	}
	id := burst(t, r)
	// b completes the pipeline once an outside envelope reaches it.
	src := `digraph p { start [shape=Mdiamond]; a [type="custom.hold"]; b [prompt="b"]; exit [shape=Msquare]; start -> a -> b -> exit }`
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := session.Start(ctx, r.durable(src, ""))
	require.NoError(t, err)
	require.Equal(t, id, s.ID())
	ack, err := publishOutside(ctx, t, r.broker, broker.NodeIn(id, "b"), "outside-1", "go")
	require.NoError(t, err)
	require.Equal(t, broker.StreamName(id), ack.Stream)
	rep, err := s.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status, rep.Reason)

	require.NoError(t, r.broker.Close())
	b := brokertest.Start(t, brokertest.Configure(func(c *broker.Config) { c.DataDir = dir }))
	buckets, streams := storeNames(t, b)
	require.Empty(t, buckets, "every session's store removed, and those prepared")
	require.Empty(t, streams, "the work stream made for the outside envelope too")
}

// TestSharedSessionArchivedListedRemoved: a durable pipeline that took a
// prepared store keeps its entries in the shared bucket while it runs.
// One that fails is archived at its end like any other completed session:
// its keys leave the shared bucket, and it is listed, its history and
// checkpoint read. One that succeeds with its checkpoint retained is
// archived too; one whose policy does not retain it is removed. (A session
// left running in the shared bucket by a killed process is resumed from
// there: TestPreparedStreamMadeLateKilled.)
func TestSharedSessionArchivedListedRemoved(t *testing.T) {
	defer session.SetPreparedBurst(time.Minute)()
	dir := t.TempDir()
	r := newRun(t, brokertest.Configure(func(c *broker.Config) { c.DataDir = dir }))
	r.reg = func(reg *nodes.Registry) {
		_ = reg.Register(nodes.Info{Type: "custom.flaky", Handler: nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
			return &nodes.Outcome{Status: nodes.StatusFail, FailureReason: "not yet"}, nil
		})})
	}
	const flaky = `digraph flaky { start [shape=Mdiamond]; a [type="custom.flaky"]; exit [shape=Msquare]; start -> a -> exit }`
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	shared := func() []string {
		ids, err := broker.SharedSessions(ctx, r.broker.JetStream())
		require.NoError(t, err)
		return ids
	}

	burst(t, r)
	s, rep := r.runSession(r.durable(flaky, ""))
	require.True(t, session.TookPrepared(s))
	require.Equal(t, "fail", rep.Status)
	id := s.ID()
	require.NotContains(t, shared(), id, "archived at its end")
	_, err := r.broker.JetStream().KeyValue(ctx, broker.KVName(id))
	require.ErrorIs(t, err, jetstream.ErrBucketNotFound, "never a bucket of its own")
	listed, err := session.List(ctx, r.broker)
	require.NoError(t, err)
	var st *session.Stored
	for i := range listed {
		if listed[i].ID == id {
			st = &listed[i]
		}
	}
	require.NotNil(t, st, "listed")
	require.Equal(t, "fail", st.Status)
	require.True(t, st.Archived)
	hist, err := session.History(ctx, r.broker, id)
	require.NoError(t, err)
	require.NotEmpty(t, hist)
	cp, err := session.LoadCheckpoint(ctx, r.broker, id, 0)
	require.NoError(t, err)
	require.Equal(t, "fail", cp.Status)

	// Retained: archived, out of the shared bucket, still read.
	cfg := r.durable(preparedPipeline, "")
	cfg.Checkpoint = &session.CheckpointPolicy{Retain: true}
	s, rep = r.runSession(cfg)
	require.True(t, session.TookPrepared(s))
	require.Equal(t, "success", rep.Status)
	require.NotContains(t, shared(), s.ID(), "archived at its end")
	cp, err = session.LoadCheckpoint(ctx, r.broker, s.ID(), 0)
	require.NoError(t, err)
	require.Equal(t, "success", cp.Status)

	// Not retained: removed.
	cfg = r.durable(preparedPipeline, "")
	cfg.Checkpoint = &session.CheckpointPolicy{}
	s, rep = r.runSession(cfg)
	require.True(t, session.TookPrepared(s))
	require.Equal(t, "success", rep.Status)
	require.Eventually(t, func() bool { return !slices.Contains(shared(), s.ID()) }, 10*time.Second, 10*time.Millisecond,
		"its keys are purged (in the background, after its end)")
	_, err = session.LoadCheckpoint(ctx, r.broker, s.ID(), 0)
	require.ErrorIs(t, err, session.ErrNoCheckpoint)
}

// TestNewPipelineInSharedBucket: a new durable pipeline under an id of its
// caller's (no prepared store has it) is placed in the shared bucket as a
// prepared store is: no bucket of its own is made (nor removed at its
// end), resume finds it there, its successful end purges its keys. Under
// an id whose own bucket the store holds already (a start an earlier
// version left unfinished), it goes on in that bucket; under the id of a
// session running in the shared bucket, the start is refused.
func TestNewPipelineInSharedBucket(t *testing.T) {
	release := make(chan struct{})
	r := newRun(t)
	r.waitFor(nil, release)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js := r.broker.JetStream()
	shared := func() []string {
		ids, err := broker.SharedSessions(ctx, js)
		require.NoError(t, err)
		return ids
	}
	ownBucket := func(id string) bool {
		_, err := js.KeyValue(ctx, broker.KVName(id))
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			return false
		}
		require.NoError(t, err)
		return true
	}

	// Named, the process's first: in the shared bucket while it runs.
	s, err := session.Start(ctx, r.durable(waits, "named1"))
	require.NoError(t, err)
	require.False(t, session.TookPrepared(s))
	require.Contains(t, shared(), "named1")
	require.False(t, ownBucket("named1"), "a bucket of its own")
	// Another start under its id is refused while it runs.
	_, err = session.Start(ctx, r.durable(waits, "named1"))
	require.Error(t, err)
	// Stopped before its end and resumed: found in the shared bucket.
	s.Stop()
	require.Contains(t, shared(), "named1", "left unfinished, kept")
	// A new start under its id, no longer running, is refused: the store
	// holds it (its claim meets its keys; nothing of it is read first).
	_, err = session.Start(ctx, r.durable(waits, "named1"))
	require.ErrorContains(t, err, "named1 already exists in the store")
	// An own bucket left under an id by a start that never recorded its
	// session: the new one is made in it, as before the shared bucket.
	_, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: broker.KVName("left1"), History: 16})
	require.NoError(t, err)
	left, err := session.Start(ctx, r.durable(waits, "left1"))
	require.NoError(t, err)
	require.NotContains(t, shared(), "left1", "not in the shared bucket")
	meta, err := session.ReadMeta(ctx, r.broker, "left1")
	require.NoError(t, err, "recorded in its own bucket")
	require.Equal(t, "left1", meta.ID)
	require.True(t, ownBucket("left1"))

	cfg := r.durable(waits, "named1")
	s, err = session.Resume(ctx, cfg)
	require.NoError(t, err)
	close(release)
	rep, err := s.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status, rep.Reason)
	require.NoError(t, session.AwaitRemoval(ctx, r.broker, "named1", "left1")) // in the background
	require.NotContains(t, shared(), "named1", "removed at its successful end")
	require.False(t, ownBucket("named1"))
	rep, err = left.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status, rep.Reason)
	require.False(t, ownBucket("left1"), "its own bucket removed at its successful end")

}

// A prepared store's id is not looked up in the store before its store is
// made (NewID's ids do not repeat in practice): an id that met a recorded
// session is refused by the session's id key, and the session is left as
// it was.
func TestPreparedStoreIDThatMetASession(t *testing.T) {
	release := make(chan struct{})
	r := newRun(t)
	r.waitFor(nil, release)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// A named pipeline, stopped before its end: recorded in the shared
	// bucket, with no owner.
	s, err := session.Start(ctx, r.durable(waits, "met1"))
	require.NoError(t, err)
	s.Stop()
	ids, err := broker.SharedSessions(ctx, r.broker.JetStream())
	require.NoError(t, err)
	require.Contains(t, ids, "met1")

	err = session.ClaimPreparedStore(ctx, r.broker, "met1")
	require.ErrorIs(t, err, session.ErrIDTaken)
	// A fresh id is made and removed.
	require.NoError(t, session.ClaimPreparedStore(ctx, r.broker, "fresh1"))
	ids, err = broker.SharedSessions(ctx, r.broker.JetStream())
	require.NoError(t, err)
	require.NotContains(t, ids, "fresh1")

	// The session is as it was: it resumes and ends.
	meta, err := session.ReadMeta(ctx, r.broker, "met1")
	require.NoError(t, err)
	require.Equal(t, "met1", meta.ID)
	s, err = session.Resume(ctx, r.durable(waits, "met1"))
	require.NoError(t, err)
	close(release)
	rep, err := s.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status, rep.Reason)
}

// TestNamedPipelineRemovedInBackground: the store of a named pipeline
// that succeeded is removed after its caller has its report, with its
// lease held until then: another owner cannot take the id meanwhile, and
// a new start under the id in the same process waits for the removal
// instead of being refused, then runs on a clean store.
func TestNamedPipelineRemovedInBackground(t *testing.T) {
	r := newRun(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js := r.broker.JetStream()
	release := session.HoldRemovals(r.broker)
	released := false
	defer func() {
		if !released {
			release()
		}
	}()
	waiting := make(chan string, 1)
	session.OnRemovalWait(func(id string) { waiting <- id })
	defer session.OnRemovalWait(nil)

	cfg := r.durable(preparedPipeline, "again1")
	cfg.Checkpoint = &session.CheckpointPolicy{}
	require.Equal(t, "success", r.runConfig(cfg).Status, "reported while its removal waits")
	ids, err := broker.SharedSessions(ctx, js)
	require.NoError(t, err)
	require.Contains(t, ids, "again1", "not removed yet")

	// Another process (a second broker on the same server) finds the id
	// held.
	other, err := r.broker.Sibling()
	require.NoError(t, err)
	defer other.Close()
	ocfg := r.durable(preparedPipeline, "again1")
	ocfg.Broker = other
	_, err = session.Start(ctx, ocfg)
	var held *session.HeldError
	require.ErrorAs(t, err, &held, "leased until removed")

	// This process's next start under the id waits for the removal.
	type result struct {
		rep *session.Report
		err error
	}
	next := make(chan result, 1)
	cfg = r.durable(preparedPipeline, "again1")
	cfg.Checkpoint = &session.CheckpointPolicy{Retain: true}
	go func() {
		s, err := session.Start(ctx, cfg)
		if err != nil {
			next <- result{err: err}
			return
		}
		rep, err := s.Wait(ctx)
		next <- result{rep, err}
	}()
	select {
	case id := <-waiting:
		require.Equal(t, "again1", id)
	case <-ctx.Done():
		t.Fatal("the start did not wait for the removal")
	}
	release()
	released = true
	select {
	case res := <-next:
		require.NoError(t, res.err)
		require.Equal(t, "success", res.rep.Status, res.rep.Reason)
	case <-ctx.Done():
		t.Fatal("the start after the removal did not end")
	}
	// The new session's store was made after the removal: it is whole.
	meta, err := session.ReadMeta(ctx, r.broker, "again1")
	require.NoError(t, err, "the second session, retained")
	require.Equal(t, "again1", meta.ID)
	cp, err := session.LoadCheckpoint(ctx, r.broker, "again1", 0)
	require.NoError(t, err)
	require.Equal(t, "success", cp.Status)
	require.Contains(t, cp.CompletedNodes, "a")
}
