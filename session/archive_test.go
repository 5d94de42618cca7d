package session_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/nodes"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

// TestCompletedSessionsArchived: every durable session that completes
// moves its record and artifacts into the store's archive, so a store of
// any number of completed runs holds the same streams (nats-server
// recovers each at every start of an embedded server); and everything a
// user does with a completed session works as before: list it, read its
// history and checkpoints, read its artifacts by reference, resume it
// (it completes at once), fork it from a checkpoint, refuse its id to a
// new session, and gc it.
func TestCompletedSessionsArchived(t *testing.T) {
	r := newRun(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	js := r.broker.JetStream()
	streams := func() []string {
		var names []string
		l := js.StreamNames(ctx)
		for n := range l.Name() {
			names = append(names, n)
		}
		require.NoError(t, l.Err())
		return names
	}
	src := `digraph arch { start [shape=Mdiamond]; exit [shape=Msquare]
		make [shape=parallelogram, tool_command="printf 'findings' > report.txt", artifacts="report.txt"]
		start -> make -> exit }`
	run := func(id string) *session.Report {
		t.Helper()
		cfg := r.config(r.load(src))
		cfg.ID, cfg.Durable, cfg.WorkDir = id, true, t.TempDir()
		s, err := session.Start(ctx, cfg)
		require.NoError(t, err)
		rep, err := s.Wait(ctx)
		require.NoError(t, err)
		require.Equal(t, "success", rep.Status, rep.Reason)
		return rep
	}
	run("a1")
	after1 := streams()
	for _, id := range []string{"a2", "a3", "a4"} {
		run(id)
	}
	require.ElementsMatch(t, after1, streams(), "three more completed sessions, no stream more")
	for _, name := range after1 {
		require.False(t, strings.Contains(name, "a1"), "nothing of a1's own is left: %v", after1)
	}
	// Each costs the archive's stream three messages (its packed entries,
	// its objects' names, its mark): a server's start recovers each.
	arch, err := js.Stream(ctx, "KV_"+broker.ArchiveName)
	require.NoError(t, err)
	require.Equal(t, uint64(4*3), arch.CachedInfo().State.Msgs)

	list, err := session.List(ctx, r.broker)
	require.NoError(t, err)
	require.Len(t, list, 4)
	for _, st := range list {
		require.Equal(t, "success", st.Status, st.ID)
		require.True(t, st.Archived, st.ID)
		// As its record says it (List read it from the archive's mark).
		cp, err := session.LoadCheckpoint(ctx, r.broker, st.ID, 0)
		require.NoError(t, err)
		meta, err := session.ReadMeta(ctx, r.broker, st.ID)
		require.NoError(t, err)
		require.Equal(t, *meta, st.Meta)
		require.Equal(t, cp.Seq, st.Seq)
		require.True(t, cp.Timestamp.Equal(st.Last), "%v %v", cp.Timestamp, st.Last)
	}
	marks, err := broker.ArchivedSessions(ctx, js)
	require.NoError(t, err)
	require.Len(t, marks, 4)
	for _, m := range marks {
		require.Contains(t, string(m.Summary), `"status":"success"`, "the mark sums the session up")
	}
	hist, err := session.History(ctx, r.broker, "a1")
	require.NoError(t, err)
	require.Equal(t, "success (run)", hist[len(hist)-1].Terminal)
	cp, err := session.LoadCheckpoint(ctx, r.broker, "a1", 0)
	require.NoError(t, err)
	require.Equal(t, "success", cp.Status)
	dot, err := session.ReadGraph(ctx, r.broker, "a1")
	require.NoError(t, err)
	require.Contains(t, string(dot), "digraph arch")

	// Its artifact, by the reference its envelope carried.
	art := &pb.Artifact{Ref: broker.ArtifactRef("a1", "make/1/report.txt")}
	data, err := broker.GetArtifact(ctx, js, art)
	require.NoError(t, err)
	require.Equal(t, "findings", string(data))

	// A new session may not take its id.
	cfg := r.config(r.load(src))
	cfg.ID, cfg.Durable = "a1", true
	_, err = session.Start(ctx, cfg)
	require.ErrorContains(t, err, "a1 already exists in the store")
	require.ElementsMatch(t, after1, streams(), "the refused start leaves no work stream or bucket (both made while the archive was asked)")
	inShared, err := broker.SharedSessions(ctx, js)
	require.NoError(t, err)
	require.NotContains(t, inShared, "a1", "the refused start leaves no key in the shared bucket")

	// A resume completes at once, and leaves it archived again.
	cfg = r.config(r.load(src))
	cfg.ID, cfg.Durable = "a2", true
	s, err := session.Resume(ctx, cfg)
	require.NoError(t, err)
	rep, err := s.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status)
	require.ElementsMatch(t, after1, streams())
	hist2, err := session.History(ctx, r.broker, "a2")
	require.NoError(t, err)
	require.Len(t, hist2, len(hist), "the resume ran nothing")

	// A fork from the checkpoint after start runs make again, as its own
	// session, and is archived in turn.
	var afterStart uint64
	for _, h := range hist {
		if h.Node == "start" {
			afterStart = h.Seq
		}
	}
	require.NotZero(t, afterStart)
	cfg = r.config(r.load(src))
	cfg.ID, cfg.ForkOf, cfg.FromCheckpoint, cfg.Durable, cfg.WorkDir = "f1", "a3", afterStart, true, t.TempDir()
	var forkRan []string
	cfg.Observer = func(ev *pb.Event) {
		if ev.Kind == "node.completed" {
			forkRan = append(forkRan, ev.Node)
		}
	}
	s, err = session.Resume(ctx, cfg)
	require.NoError(t, err)
	rep, err = s.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status, rep.Reason)
	require.Contains(t, forkRan, "make")
	require.NotContains(t, forkRan, "start")
	require.ElementsMatch(t, after1, streams())
	m, err := session.ReadMeta(ctx, r.broker, "f1")
	require.NoError(t, err)
	require.Equal(t, "a3", m.ForkOf)

	// gc removes them from the archive.
	removed, err := session.GC(ctx, r.broker, time.Nanosecond, time.Now().Add(time.Hour), false)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"a1", "a2", "a3", "a4", "f1"}, removed)
	list, err = session.List(ctx, r.broker)
	require.NoError(t, err)
	require.Empty(t, list)
	for _, stream := range []string{"KV_" + broker.ArchiveName, "OBJ_" + broker.ArchiveName} {
		st, err := js.Stream(ctx, stream)
		require.NoError(t, err)
		info, err := st.Info(ctx)
		require.NoError(t, err)
		require.Zero(t, info.State.Msgs, "%s holds nothing of the removed sessions", stream)
	}
	_, err = session.ReadMeta(ctx, r.broker, "a1")
	require.ErrorIs(t, err, session.ErrNoCheckpoint)
	_, err = js.KeyValue(ctx, broker.KVName("a1"))
	require.ErrorIs(t, err, jetstream.ErrBucketNotFound)
}

// TestArchivingInterrupted: a completed session whose archiving did not
// happen (its process died first, or a store written before sessions were
// archived) still has its bucket; gc archives it, and until then every
// reader reads its bucket.
func TestArchivingInterrupted(t *testing.T) {
	r := newRun(t)
	r.reg = func(reg *nodes.Registry) {
		require.NoError(t, reg.Register(nodes.Info{Type: "custom.echo", Handler: nodes.HandlerFunc(
			func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
				return &nodes.Outcome{Status: nodes.StatusSuccess}, nil
			})}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	js := r.broker.JetStream()
	cfg := r.config(r.load(`digraph old { start [shape=Mdiamond]; a [type="custom.echo"]; exit [shape=Msquare]; start -> a -> exit }`))
	cfg.ID, cfg.Durable = "old", true
	s, err := session.Start(ctx, cfg)
	require.NoError(t, err)
	rep, err := s.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status)
	// As it was before its archiving: its bucket back.
	require.NoError(t, broker.RestoreSession(ctx, js, "old", broker.FileStorage))
	list, err := session.List(ctx, r.broker)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.False(t, list[0].Archived)
	require.Equal(t, "success", list[0].Status)

	removed, err := session.GC(ctx, r.broker, 7*24*time.Hour, time.Now(), false)
	require.NoError(t, err)
	require.Empty(t, removed)
	_, err = js.KeyValue(ctx, broker.KVName("old"))
	require.ErrorIs(t, err, jetstream.ErrBucketNotFound, "gc archived it")
	list, err = session.List(ctx, r.broker)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.True(t, list[0].Archived)
	require.Equal(t, "success", list[0].Status)
}
