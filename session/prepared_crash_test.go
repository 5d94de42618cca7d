package session_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/internal/crash"
	"github.com/switchyard/switchyard/internal/testio"
	"github.com/switchyard/switchyard/session"
)

// childDirEnv names the store of a crash test's child process.
const childDirEnv = "SY_TEST_CHILD_DIR"

// childDir is the store a crash test's child runs on ("" in the parent).
func childDir() string { return os.Getenv(childDirEnv) }

// killedChild runs test (this test binary, that test alone) as a child
// on a new store with kill point point armed, requires that it was
// killed there, and returns the store's directory.
func killedChild(t *testing.T, test, point string) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	// The child's own temporary directories go under this test's: killed,
	// it removes none of them.
	cmd.Env = append(os.Environ(), childDirEnv+"="+dir, crash.Env+"="+point, "TMPDIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	require.True(t, testio.Killed(err), "the child was not killed at %s: %v\n%s", point, err, out)
	return dir
}

// TestPreparedStoreKilled: a process killed (SIGKILL) right after it
// prepared the next pipeline's store leaves a store no session recorded:
// no listing shows it, and `gc` removes it — its lease names a process of
// this host that is gone — leaving the store empty. The child is this test
// binary, running two durable pipelines in a burst on the store, with the
// kill point store-prepared armed.
func TestPreparedStoreKilled(t *testing.T) {
	if dir := childDir(); dir != "" {
		defer session.SetPreparedBurst(time.Minute)()
		r := newRun(t, brokertest.Configure(func(c *broker.Config) { c.DataDir = dir }))
		burst(t, r) // killed while the third start's store is prepared
		t.Fatal("not killed at store-prepared")
	}
	dir := killedChild(t, "TestPreparedStoreKilled", "store-prepared:1")

	b := brokertest.Start(t, brokertest.Configure(func(c *broker.Config) { c.DataDir = dir }))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The second pipeline of the burst may have been anywhere when the
	// kill came (the third's store is made beside it): not recorded yet,
	// recorded and running (resumable), ended and not yet removed, or
	// removed.
	unrecorded := func() (buckets, streams []string) {
		listed, err := session.List(ctx, b)
		require.NoError(t, err)
		ids := map[string]bool{}
		for _, st := range listed {
			ids[st.ID] = true
		}
		bs, ss := storeNames(t, b)
		for _, name := range bs {
			if !ids[name] {
				buckets = append(buckets, name)
			}
		}
		for _, name := range ss {
			if !ids[strings.TrimPrefix(name, broker.StreamName(""))] {
				streams = append(streams, name)
			}
		}
		return buckets, streams
	}
	buckets, _ := unrecorded()
	require.NotEmpty(t, buckets, "the prepared store is left, recorded by no session")
	_, err := session.GC(ctx, b, time.Hour, time.Now(), false)
	require.NoError(t, err)
	buckets, streams := unrecorded()
	require.Empty(t, buckets, "gc removed every store no session recorded")
	require.Empty(t, streams, "and every work stream no session recorded")
}

// TestPreparedStreamMadeLateKilled: a process killed (SIGKILL) once the
// intake of a pipeline on a prepared store made the work stream for the
// first outside envelope, before that envelope is stored (kill point
// stream-made-late), loses nothing: the publisher had no acknowledgement
// and publishes again once the session is resumed, and the node reads the
// envelope once. The child is this test binary: a burst of durable
// pipelines, then one on the prepared store to which it publishes.
func TestPreparedStreamMadeLateKilled(t *testing.T) {
	started, seen := make(chan struct{}, 4), make(chan string, 4)
	if dir := childDir(); dir != "" {
		defer session.SetPreparedBurst(time.Minute)()
		r := lateRun(t, dir, started, seen)
		burst(t, r)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := session.Start(ctx, r.durable(latePipeline, ""))
		require.NoError(t, err)
		require.True(t, session.TookPrepared(s))
		<-started
		_, _ = publishOutside(ctx, t, r.broker, broker.NodeIn(s.ID(), "b"), "outside-1", "hello b")
		t.Fatal("not killed at stream-made-late")
	}
	dir := killedChild(t, "TestPreparedStreamMadeLateKilled", "stream-made-late:1")

	r := lateRun(t, dir, started, seen)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	running, err := session.Running(ctx, r.broker)
	require.NoError(t, err)
	require.Len(t, running, 1, "the pipeline on the prepared store, left running")
	id := running[0].ID
	st, err := r.broker.JetStream().Stream(ctx, broker.StreamName(id))
	require.NoError(t, err, "the stream was made before the kill")
	require.Zero(t, st.CachedInfo().State.Msgs, "the envelope was not stored")

	s, err := session.Resume(ctx, r.durable(latePipeline, id))
	require.NoError(t, err)
	defer s.Stop()
	<-started
	// The publisher, never acknowledged, publishes again.
	ack, err := publishOutside(ctx, t, r.broker, broker.NodeIn(id, "b"), "outside-1", "hello b")
	require.NoError(t, err)
	require.Equal(t, broker.StreamName(id), ack.Stream)
	select {
	case got := <-seen:
		require.Equal(t, "hello b", got)
	case <-ctx.Done():
		t.Fatal("node b never read the outside envelope")
	}
	_, err = publishOutside(ctx, t, r.broker, broker.NodeIn(id, "b"), "outside-1", "hello b")
	require.NoError(t, err, "a repeat is acknowledged")
	// The stream also holds what the resume sent on for a (start's
	// handoff, pending in the journal).
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(broker.NodeIn(id, "b")))
	require.NoError(t, err)
	require.Equal(t, map[string]uint64{broker.NodeIn(id, "b"): 1}, info.State.Subjects, "and stored once")
}

// TestCreateStreamEarlyKilled: a process killed (SIGKILL) once a new
// reactive session's work stream was made beside its bucket (kill point
// create-stream-early; a pipeline makes no work stream at its start, so
// cmd/switchyard's TestCrashCreation of a pipeline does not reach it)
// leaves nothing recorded: a resume says so, `gc` removes what the start
// left, and a start under the same id runs. The child is this test binary.
func TestCreateStreamEarlyKilled(t *testing.T) {
	const src = `digraph s { kind="session"; a [prompt="a"] }`
	if dir := childDir(); dir != "" {
		r := newRun(t, brokertest.Configure(func(c *broker.Config) { c.DataDir = dir }))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = session.Start(ctx, r.durable(src, "early"))
		t.Fatal("not killed at create-stream-early")
	}
	dir := killedChild(t, "TestCreateStreamEarlyKilled", "create-stream-early:1")

	r := newRun(t, brokertest.Configure(func(c *broker.Config) { c.DataDir = dir }))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, streams := storeNames(t, r.broker)
	require.Contains(t, streams, broker.StreamName("early"), "killed once its work stream was made")
	_, err := session.Resume(ctx, r.durable(src, "early"))
	require.ErrorIs(t, err, session.ErrNoCheckpoint, "nothing of it is recorded")
	_, err = session.GC(ctx, r.broker, time.Hour, time.Now(), false)
	require.NoError(t, err)
	buckets, streams := storeNames(t, r.broker)
	require.Empty(t, buckets)
	require.Empty(t, streams, "gc removed what the start left")
	s, err := session.Start(ctx, r.durable(src, "early"))
	require.NoError(t, err, "started afresh under its id")
	s.Stop()
}
