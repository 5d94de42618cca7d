package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard/switchyard/actors"
	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/nodes"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

// TestGC keeps a completed session for the retention period, then removes
// its stream, bucket and objects; a running session is never removed.
func TestGC(t *testing.T) {
	r := newRun(t)
	hold := make(chan struct{})
	defer close(hold)
	r.reg = func(reg *nodes.Registry) {
		require.NoError(t, reg.Register(nodes.Info{Type: "custom.echo", Handler: nodes.HandlerFunc(
			func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
				if in.Graph.Name == "busy" {
					select {
					case <-hold:
					case <-ctx.Done():
					}
				}
				return &nodes.Outcome{Status: nodes.StatusSuccess}, nil
			})}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	at := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	fake := clock.NewFake(at)

	done := r.config(r.load(`digraph done { start [shape=Mdiamond]; a [type="custom.echo"]; exit [shape=Msquare]; start -> a -> exit }`))
	done.ID, done.Durable, done.Clock = "old", true, fake
	s, err := session.Start(ctx, done)
	require.NoError(t, err)
	rep, err := s.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status)

	busy := r.config(r.load(`digraph busy { start [shape=Mdiamond]; a [type="custom.echo"]; exit [shape=Msquare]; start -> a -> exit }`))
	busy.ID, busy.Durable, busy.Clock = "busy", true, fake
	running, err := session.Start(ctx, busy)
	require.NoError(t, err)
	defer running.Stop()

	list, err := session.List(ctx, r.broker)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, "busy", list[0].ID)
	require.Equal(t, "old", list[1].ID)
	require.Equal(t, "success", list[1].Status)
	require.Equal(t, at, list[1].Last, "the time of its last checkpoint")

	removed, err := session.GC(ctx, r.broker, 7*24*time.Hour, at.Add(6*24*time.Hour), false)
	require.NoError(t, err)
	require.Empty(t, removed, "kept for the retention period")
	removed, err = session.GC(ctx, r.broker, 7*24*time.Hour, at.Add(8*24*time.Hour), true)
	require.NoError(t, err)
	require.Equal(t, []string{"old"}, removed, "a dry run lists")
	_, err = session.ReadMeta(ctx, r.broker, "old")
	require.NoError(t, err, "a dry run removes nothing")

	removed, err = session.GC(ctx, r.broker, 7*24*time.Hour, at.Add(8*24*time.Hour), false)
	require.NoError(t, err)
	require.Equal(t, []string{"old"}, removed, "the running session is kept whatever its age")
	_, err = session.ReadMeta(ctx, r.broker, "old")
	require.ErrorIs(t, err, session.ErrNoCheckpoint)
	_, err = r.broker.JetStream().Stream(ctx, broker.StreamName("old"))
	require.ErrorIs(t, err, jetstream.ErrStreamNotFound)
	_, err = session.ReadMeta(ctx, r.broker, "busy")
	require.NoError(t, err)
}

// TestFinishedSessionReleasesItsConsumer: a durable session that completed
// leaves no work stream (nor its consumer) and no empty dead-letter stream
// in the store, only its record in the archive (every later embedded
// server's start and stop would pay for them), one that was interrupted or stopped keeps them
// (a pipeline's work stream and consumer are made for its first outside
// envelope, or its stream at the stop of one left unfinished), one with dead letters keeps those, a resume of the
// finished one (--reopen) works all the same, and GC releases what a
// finished session of an older store still has.
func TestFinishedSessionReleasesItsConsumer(t *testing.T) {
	r := newRun(t)
	hold := make(chan struct{})
	r.reg = func(reg *nodes.Registry) {
		require.NoError(t, reg.Register(nodes.Info{Type: "custom.echo", Handler: nodes.HandlerFunc(
			func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
				switch in.Graph.Name {
				case "busy":
					select {
					case <-hold:
					case <-ctx.Done():
						return nil, ctx.Err()
					}
				case "ended":
					<-ctx.Done()
					return nil, ctx.Err()
				}
				return &nodes.Outcome{Status: nodes.StatusSuccess}, nil
			})}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js := r.broker.JetStream()
	consumer := func(id string) error {
		_, err := js.Consumer(ctx, broker.StreamName(id), actors.ConsumerName)
		return err
	}
	workStream := func(id string) error {
		_, err := js.Stream(ctx, broker.StreamName(id))
		return err
	}
	deadLetters := func(id string) error {
		_, err := js.Stream(ctx, broker.DeadLetterStreamName(id))
		return err
	}

	done := r.config(r.load(`digraph done { start [shape=Mdiamond]; a [type="custom.echo"]; exit [shape=Msquare]; start -> a -> exit }`))
	done.ID, done.Durable = "done", true
	s, err := session.Start(ctx, done)
	require.NoError(t, err)
	rep, err := s.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status)
	require.ErrorIs(t, workStream("done"), jetstream.ErrStreamNotFound, "its work stream (and consumer) released at its end")
	require.ErrorIs(t, deadLetters("done"), jetstream.ErrStreamNotFound, "no dead letters, no stream")
	_, err = session.ReadMeta(ctx, r.broker, "done")
	require.NoError(t, err, "its record is kept")

	busy := r.config(r.load(`digraph busy { start [shape=Mdiamond]; a [type="custom.echo"]; exit [shape=Msquare]; start -> a -> exit }`))
	busy.ID, busy.Durable = "busy", true
	s, err = session.Start(ctx, busy)
	require.NoError(t, err)
	s.Stop()
	close(hold)
	require.NoError(t, workStream("busy"), "an interrupted pipeline has its work stream made at its stop (its resume makes the consumer)")
	require.ErrorIs(t, deadLetters("busy"), jetstream.ErrStreamNotFound, "no dead letter yet, no stream: the first refusal makes it")

	ended := r.config(r.load(`digraph ended { start [shape=Mdiamond]; a [type="custom.echo"]; exit [shape=Msquare]; start -> a -> exit }`))
	ended.ID, ended.Durable = "ended", true
	s, err = session.Start(ctx, ended)
	require.NoError(t, err)
	// Refused by its intake, which makes no work stream for it.
	_, err = js.Publish(ctx, broker.NodeIn("ended", "a"), []byte("not an envelope"))
	require.Error(t, err)
	require.ErrorIs(t, workStream("ended"), jetstream.ErrStreamNotFound, "a refusal makes no work stream")
	// The first envelope accepted makes the stream and the consumer.
	data, err := proto.Marshal(&pb.Envelope{Id: "outside-1", Kind: "handoff", Payload: &pb.Payload{Message: "m"}})
	require.NoError(t, err)
	_, err = js.Publish(ctx, broker.NodeIn("ended", "a"), data)
	require.NoError(t, err)
	require.NoError(t, consumer("ended"), "a running session consumes")
	c, err := js.Consumer(ctx, broker.StreamName("ended"), actors.ConsumerName)
	require.NoError(t, err)
	require.True(t, r.broker.Embedded())
	require.True(t, c.CachedInfo().Config.MemoryStorage, "the consumer of an embedded server's session keeps its state in memory: the server dies with the process")
	require.Eventually(t, func() bool {
		st, err := js.Stream(ctx, broker.DeadLetterStreamName("ended"))
		return err == nil && st.CachedInfo().State.Msgs == 1
	}, 10*time.Second, 10*time.Millisecond, "the refused envelope is a dead letter")
	require.NoError(t, s.End("operator"))
	require.ErrorIs(t, consumer("ended"), jetstream.ErrConsumerNotFound, "an operator's stop is an end")
	require.NoError(t, workStream("ended"), "a stopped session may be reopened: its work stream stays")
	require.NoError(t, deadLetters("ended"), "its dead letters are kept")

	again := r.config(r.load(`digraph done { start [shape=Mdiamond]; a [type="custom.echo"]; exit [shape=Msquare]; start -> a -> exit }`))
	again.ID, again.Reopen = "done", true
	s, err = session.Resume(ctx, again)
	require.NoError(t, err)
	rep, err = s.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status)

	require.ErrorIs(t, workStream("done"), jetstream.ErrStreamNotFound, "released again")

	// A store written before consumers and work streams were released (and
	// completed sessions archived): GC releases the finished session's,
	// archives it, and leaves the interrupted one's.
	require.NoError(t, broker.RestoreSession(ctx, js, "done", broker.FileStorage))
	_, err = broker.EnsureSessionStream(ctx, js, "done", broker.FileStorage)
	require.NoError(t, err)
	_, err = js.CreateOrUpdateConsumer(ctx, broker.StreamName("done"), jetstream.ConsumerConfig{Durable: actors.ConsumerName})
	require.NoError(t, err)
	_, err = broker.EnsureDeadLetters(ctx, js, "done", broker.FileStorage)
	require.NoError(t, err)
	removed, err := session.GC(ctx, r.broker, 7*24*time.Hour, time.Now(), false)
	require.NoError(t, err)
	require.Empty(t, removed)
	require.ErrorIs(t, workStream("done"), jetstream.ErrStreamNotFound)
	require.ErrorIs(t, deadLetters("done"), jetstream.ErrStreamNotFound)
	archived, err := broker.Archived(ctx, js, "done")
	require.NoError(t, err)
	require.True(t, archived)
	require.NoError(t, workStream("busy"))
	require.NoError(t, deadLetters("ended"))
}

// TestRunningReadsOnlyUnfinishedSessions: Running lists the sessions
// left running — not those stopped by their operator, nor the completed
// ones, whose work stream is gone and whose bucket moved to the archive
// (so the finished sessions a store keeps are not read at every start)
// or, in a store written before they gave them up, whose record says they
// completed.
func TestRunningReadsOnlyUnfinishedSessions(t *testing.T) {
	r := newRun(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js := r.broker.JetStream()
	start := func(id, src string) *session.Session {
		t.Helper()
		s, err := session.Start(ctx, r.durable(src, id))
		require.NoError(t, err)
		return s
	}
	reactive := `digraph s { kind="session"; a [prompt="a"] }`
	pipeline := `digraph p { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }`
	start("left", reactive).Stop()
	require.NoError(t, start("ended", reactive).End("operator"))
	for _, id := range []string{"done", "older"} {
		rep, err := start(id, pipeline).Wait(ctx)
		require.NoError(t, err)
		require.Equal(t, "success", rep.Status)
	}
	// A store written before completed sessions gave their stream up.
	_, err := broker.EnsureSessionStream(ctx, js, "older", broker.FileStorage)
	require.NoError(t, err)

	running, err := session.Running(ctx, r.broker)
	require.NoError(t, err)
	var ids []string
	for _, m := range running {
		ids = append(ids, m.ID)
	}
	require.Equal(t, []string{"left"}, ids)
	all, err := session.List(ctx, r.broker)
	require.NoError(t, err)
	require.Len(t, all, 4, "List reads every session")
}

// TestRemovedSessionLeavesNothing: a session that succeeds under a policy
// that does not retain it (the Go API's default) leaves nothing of itself
// in the store — no work stream, bucket or dead-letter stream, and its
// lease purged (its owner purges it as it gives it up) — and its id is
// free for a new session at once.
func TestRemovedSessionLeavesNothing(t *testing.T) {
	r := newRun(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js := r.broker.JetStream()
	const src = `digraph p { start [shape=Mdiamond]; a [prompt="a"]; exit [shape=Msquare]; start -> a -> exit }`
	for range 2 { // the second takes the id the first left free
		cfg := r.durable(src, "gone")
		cfg.Checkpoint = &session.CheckpointPolicy{}
		s, err := session.Start(ctx, cfg)
		require.NoError(t, err)
		rep, err := s.Wait(ctx)
		require.NoError(t, err)
		require.Equal(t, "success", rep.Status)
		requireStoreGone(ctx, t, r.broker, "gone")
		leases, err := js.Stream(ctx, "KV_"+broker.LeaseBucket)
		require.NoError(t, err)
		m, err := leases.GetLastMsgForSubject(ctx, "$KV."+broker.LeaseBucket+".gone")
		require.NoError(t, err)
		require.Equal(t, "PURGE", m.Header.Get("KV-Operation"), "the lease is purged, not left deleted")
		_, err = session.ReadMeta(ctx, r.broker, "gone")
		require.ErrorIs(t, err, session.ErrNoCheckpoint)
	}
}

// TestRemovedSessionWithDeadLettersLeavesNothing: a removed session that
// refused an envelope while it ran (its dead-letter stream made then)
// leaves no dead-letter stream either; one that refused none is removed
// without asking for it (TestDurableRunRequests).
func TestRemovedSessionWithDeadLettersLeavesNothing(t *testing.T) {
	r := newRun(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	release := make(chan struct{})
	r.reg = func(reg *nodes.Registry) {
		require.NoError(t, reg.Register(nodes.Info{Type: "custom.echo", Handler: nodes.HandlerFunc(
			func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
				select {
				case <-release:
				case <-ctx.Done():
				}
				return &nodes.Outcome{Status: nodes.StatusSuccess}, nil
			})}))
	}
	cfg := r.durable(`digraph p { start [shape=Mdiamond]; a [type="custom.echo"]; exit [shape=Msquare]; start -> a -> exit }`, "dlq")
	cfg.Checkpoint = &session.CheckpointPolicy{}
	s, err := session.Start(ctx, cfg)
	require.NoError(t, err)
	require.NoError(t, r.broker.Conn().Publish(broker.NodeIn("dlq", "ghost"), []byte(`{"payload":{"message":"boo"}}`)))
	js := r.broker.JetStream()
	require.Eventually(t, func() bool {
		_, err := js.Stream(ctx, broker.DeadLetterStreamName("dlq"))
		return err == nil
	}, 20*time.Second, 10*time.Millisecond, "the refusal made the dead-letter stream")
	close(release)
	rep, err := s.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status)
	requireStoreGone(ctx, t, r.broker, "dlq")
}

// requireStoreGone checks, once the removal in the background is over
// (Session.remover), that nothing of session id is left: its work stream,
// its dead letters, its own bucket, its keys in the shared bucket.
func requireStoreGone(ctx context.Context, t *testing.T, b *broker.Broker, id string) {
	t.Helper()
	require.NoError(t, session.AwaitRemoval(ctx, b, id))
	js := b.JetStream()
	for _, name := range []string{broker.StreamName(id), broker.DeadLetterStreamName(id), "KV_" + broker.KVName(id),
		broker.EventStreamName(id), "OBJ_" + broker.ObjectsName(id)} {
		_, err := js.Stream(ctx, name)
		require.ErrorIs(t, err, jetstream.ErrStreamNotFound, name)
	}
	shared, err := broker.SharedSessions(ctx, js)
	require.NoError(t, err)
	require.NotContains(t, shared, id, "its keys in the shared bucket")
}
