package session_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
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
	// Sweeps count written records, and an object is made before its
	// firing's record is written: up to the records queued for the
	// journal's writer more (at most a gap's worth: the writer does not
	// hold a sweep up). The envelopes the stream still stores keep theirs
	// too.
	maxGap, stored, err := session.SweepArtifacts(s)
	require.NoError(t, err)
	n3, _, _ := objects()
	t.Logf("%d objects kept; sweeps at most %d commits apart; %d envelopes stored", len(n3), maxGap, stored)
	require.LessOrEqual(t, len(n3), (session.JournalKeep+3*int(max(maxGap, uint64(every))))/2+2+int(stored))
}
