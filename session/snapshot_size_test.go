package session_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

// TestLargeStateResumes: a durable session whose state outgrows the
// snapshot period (a pipeline of 1,500 nodes: their counters and context
// keys) writes its snapshots less often while its journal is compacted
// meanwhile; stopped midway and resumed, it goes on from where it was —
// every node ran once — and the records compacted lie before a snapshot.
func TestLargeStateResumes(t *testing.T) {
	defer session.SetJournalKeep(64, 128)()
	const n = 1500
	var b strings.Builder
	b.WriteString("digraph big { max_iterations=10000\nstart [shape=Mdiamond]; exit [shape=Msquare]\n")
	prev := "start"
	for i := range n {
		id := fmt.Sprintf("d%d", i)
		fmt.Fprintf(&b, "%s [shape=diamond]\n%s -> %s\n", id, prev, id)
		prev = id
	}
	fmt.Fprintf(&b, "%s -> exit\n}\n", prev)
	src := b.String()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	r := newRun(t)
	cfg := r.durable(src, "big")
	midway := make(chan struct{})
	completed := 0
	cfg.Observer = func(ev *pb.Event) {
		if ev.Kind == "node.completed" {
			if completed++; completed == n*2/3 {
				close(midway)
			}
		}
	}
	s1, err := session.Start(ctx, cfg)
	require.NoError(t, err)
	select {
	case <-midway:
	case <-ctx.Done():
		t.Fatalf("%d nodes completed", completed)
	}
	s1.Stop()

	s2, err := session.Resume(ctx, r.durable(src, "big"))
	require.NoError(t, err)
	rep, err := s2.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status, rep.Reason)

	cp, err := session.LoadCheckpoint(ctx, r.broker, "big", 0)
	require.NoError(t, err)
	for i := range n {
		require.Equal(t, 1, cp.NodeVisits[fmt.Sprintf("d%d", i)], "d%d", i)
	}
	hist, err := session.History(ctx, r.broker, "big")
	require.NoError(t, err)
	require.Greater(t, hist[0].Seq, uint64(1), "the journal was compacted")
}
