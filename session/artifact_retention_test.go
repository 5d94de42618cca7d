package session_test

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/graph"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

// An agent with an outgoing edge stores its response at every firing;
// first's output waits at a manual gate the whole run.
const retentionGraph = `digraph r { kind="session"; stall_after=0
	work [prompt="work"]; sink [shape=diamond]; work -> sink
	first [prompt="first"]; hold [prompt="hold", trigger=manual]; first -> hold
}`

// TestArtifactsBounded: the objects agents with outgoing edges store are
// deleted once the journal compacted the commits that made them, except
// what a live envelope still refers to (here one held at a manual gate,
// which still gets it when it fires). Measured after 1,000 firings of the
// agent and after the whole run: 2,000 by default, with a journal of 256
// records compacted every 64; 10,000 with SWITCHYARD_FULL=1 (CI, under
// -race) and the store's own journal settings; SWITCHYARD_ARTIFACT_FIRINGS
// sets the count (100,000 for the figure in docs/durability.md: minutes).
func TestArtifactsBounded(t *testing.T) {
	total, every := 2_000, 1024
	n, err := strconv.Atoi(os.Getenv("SWITCHYARD_ARTIFACT_FIRINGS"))
	switch {
	case err == nil && n >= 1000:
		total = n
	case os.Getenv("SWITCHYARD_FULL") == "1":
		total = 10_000
	default:
		every = 64
		t.Cleanup(session.SetJournalKeep(256, uint64(every)))
	}
	if testing.Short() {
		total = 1_200
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	r := newRun(t)
	g, diags := graph.Load("r.dot", []byte(retentionGraph), graph.AsSession())
	require.False(t, diags.HasErrors(), "%v", diags)
	cfg := r.config(g)
	cfg.ID, cfg.Durable, cfg.LogsDir = "kept", true, ""
	fired := make(chan string, total+16)
	cfg.Observer = func(ev *pb.Event) {
		if ev.Kind == "node.completed" && (ev.Node == "sink" || ev.Node == "first" || ev.Node == "hold") {
			fired <- ev.Node + " " + ev.Status
		}
	}
	s, err := session.Start(ctx, cfg)
	require.NoError(t, err)
	defer s.Stop()
	js := r.broker.JetStream()
	waitFired := func(what string) {
		t.Helper()
		select {
		case got := <-fired:
			require.Equal(t, what, got)
		case <-ctx.Done():
			t.Fatalf("no %s", what)
		}
	}
	objects := func() (names []string, msgs, bytes uint64) {
		t.Helper()
		names, err := broker.ArtifactNames(ctx, js, "kept")
		require.NoError(t, err)
		// After the list: a sweep running meanwhile makes it fewer.
		st, err := js.Stream(ctx, "OBJ_"+broker.ObjectsName("kept"))
		require.NoError(t, err)
		if os.Getenv("DEBUG_OBJ") != "" {
			info, err := st.Info(ctx, jetstream.WithSubjectFilter(">"))
			require.NoError(t, err)
			for subj, n := range info.State.Subjects {
				if n != 1 || !strings.Contains(subj, ".C.") && !strings.Contains(subj, ".M.") {
					t.Logf("%s: %d", subj, n)
				}
			}
			t.Logf("%d subjects", len(info.State.Subjects))
		}
		return names, st.CachedInfo().State.Msgs, st.CachedInfo().State.Bytes
	}

	_, err = js.Publish(ctx, broker.NodeIn("kept", "first"), []byte(`{"payload":{"message":"keep me"}}`))
	require.NoError(t, err)
	waitFired("first success")

	run := func(from, to int) {
		for ; from < to; from += 1000 {
			var acks []jetstream.PubAckFuture
			for i := from; i < min(from+1000, to); i++ {
				f, err := js.PublishAsync(broker.NodeIn("kept", "work"), []byte(`{"payload":{"message":"n`+strconv.Itoa(i)+`"}}`),
					jetstream.WithMsgID("ev"+strconv.Itoa(i)))
				require.NoError(t, err)
				acks = append(acks, f)
			}
			for _, f := range acks {
				select {
				case <-f.Ok():
				case err := <-f.Err():
					t.Fatalf("not acknowledged: %v", err)
				}
			}
			for i := from; i < min(from+1000, to); i++ {
				waitFired("sink success")
			}
		}
	}
	run(0, 1000)
	n1, m1, b1 := objects()
	sweeps, deleted := session.ArtifactSweeps(s)
	t.Logf("after 1,000 firings: %d objects (%d messages, %d bytes); %d sweeps deleted %d", len(n1), m1, b1, sweeps, deleted)
	run(1000, total)
	n2, m2, b2 := objects()
	sweeps, deleted = session.ArtifactSweeps(s)
	t.Logf("after %d firings: %d objects (%d messages, %d bytes); %d sweeps deleted %d (JournalKeep %d)",
		total, len(n2), m2, b2, sweeps, deleted, session.JournalKeep)
	require.Positive(t, deleted)
	require.LessOrEqual(t, m2, 2*uint64(len(n2)), "no delete markers: a chunk and a description per object")
	held := 0
	for _, name := range n2 {
		if strings.HasPrefix(name, "first/") {
			held++
		}
	}
	require.Equal(t, 1, held, "the object a held envelope refers to is kept")
	require.NoError(t, s.System().Trigger("hold", nil))
	waitFired("hold success")

	// Two commits a firing (work, sink): once a sweep knew of every commit
	// (and the work stream was trimmed of what was consumed: an envelope
	// stored keeps its objects), an object seen by a sweep JournalKeep
	// commits before it is deleted.
	// An object is seen by the first sweep that lists the store after it
	// was made, which knows of at most two sweeps' gap of commits more, so
	// what is kept is the objects of the last JournalKeep commits and two
	// gaps more (a sweep is kicked every compactEvery commits, but sweeps
	// run one at a time beside the firings: batched commits,
	// journal_writer.go, outrun them under -race).
	// A sweep is numbered by the last record numbered, written or queued
	// for the journal's writer: up to the records queued more (at most a
	// gap's worth: the writer does not hold a sweep up). The envelopes the
	// stream still stores keep theirs too.
	maxGap, stored, err := session.SweepArtifacts(s)
	require.NoError(t, err)
	n3, _, _ := objects()
	t.Logf("%d objects kept; sweeps at most %d commits apart; %d envelopes stored", len(n3), maxGap, stored)
	require.LessOrEqual(t, len(n3), (session.JournalKeep+3*int(max(maxGap, uint64(every))))/2+2+int(stored))
}

// TestArtifactsNeverEarly: an object is deleted only once the record of
// the firing that made it is JournalKeep records behind the last one
// written, however many records wait unwritten when a sweep first sees it.
// A checkpoint policy of one write an hour (on a fake clock) holds the
// records of five firings while a sweep lists their objects; then every
// firing is written, and a sweep after each one may delete only the
// objects whose records are old enough.
func TestArtifactsNeverEarly(t *testing.T) {
	const keep = 6
	t.Cleanup(session.SetJournalKeep(keep, 2))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := newRun(t)
	g, diags := graph.Load("r.dot", []byte(`digraph r { kind="session"; stall_after=0
		work [prompt="work"]; sink [shape=diamond]; work -> sink }`), graph.AsSession())
	require.False(t, diags.HasErrors(), "%v", diags)
	fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := r.config(g)
	cfg.ID, cfg.Durable, cfg.LogsDir, cfg.Clock = "early", true, "", fake
	cfg.Checkpoint = &session.CheckpointPolicy{Every: time.Hour}
	sinks := make(chan struct{}, 64)
	saved := make(chan uint64, 256) // the records of work's firings, in order
	cfg.Observer = func(ev *pb.Event) {
		switch {
		case ev.Kind == "node.completed" && ev.Node == "sink":
			sinks <- struct{}{}
		case ev.Kind == "checkpoint.saved" && ev.Node == "work":
			for _, a := range ev.Attrs {
				if a.Key == "checkpoint" {
					n, err := strconv.ParseUint(a.Value, 10, 64)
					if err == nil {
						saved <- n
					}
				}
			}
		}
	}
	s, err := session.Start(ctx, cfg)
	require.NoError(t, err)
	defer s.Stop()
	js := r.broker.JetStream()
	send := func(i int) {
		t.Helper()
		_, err := js.Publish(ctx, broker.NodeIn("early", "work"), []byte(`{"payload":{"message":"n`+strconv.Itoa(i)+`"}}`),
			jetstream.WithMsgID("ev"+strconv.Itoa(i)))
		require.NoError(t, err)
		select {
		case <-sinks:
		case <-ctx.Done():
			t.Fatalf("input %d did not reach sink", i)
		}
	}
	exists := func(name string) bool {
		t.Helper()
		names, err := broker.ArtifactNames(ctx, js, "early")
		require.NoError(t, err)
		return slices.Contains(names, name)
	}
	// Firing 1 is written (the first commit is due), 2..6 are held.
	const held = 6
	for i := 1; i <= held; i++ {
		send(i)
	}
	for i := 1; i <= held; i++ {
		require.True(t, exists("work/"+strconv.Itoa(i)+"/response.md"))
	}
	_, err = session.SweepArtifactsNow(s)
	require.NoError(t, err)

	var records []uint64 // records[i-1]: the record of work's firing i
	record := func(firing int) uint64 {
		t.Helper()
		for len(records) < firing {
			select {
			case n := <-saved:
				records = append(records, n)
			case <-ctx.Done():
				t.Fatalf("no record of work's firing %d", firing)
			}
		}
		return records[firing-1]
	}
	deleted := map[int]bool{}
	for i := held + 1; len(deleted) < held; i++ {
		require.Less(t, i, 100, "objects kept: %v deleted", deleted)
		fake.Advance(time.Hour) // this firing's commit writes what is held
		send(i)
		written, err := session.SweepArtifactsNow(s)
		require.NoError(t, err)
		for f := 1; f <= held; f++ {
			if deleted[f] || exists("work/"+strconv.Itoa(f)+"/response.md") {
				continue
			}
			deleted[f] = true
			require.GreaterOrEqual(t, written, record(f)+keep,
				"work/%d/response.md deleted when record %d was the last written; its record is %d", f, written, record(f))
		}
	}
}
