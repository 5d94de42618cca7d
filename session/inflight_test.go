package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/actors"
)

// TestNodeWaitsForItsJournal: a node runs at most actors.SetMaxInflight's
// firings ahead of its journal. With the journal's writes held, a node
// given 600 envelopes fires 100 of them and waits, the next one taken as
// its next firing's input and the other 499 in its buffer; once the
// journal writes again, the rest fire, each envelope once, and every
// delivery is acknowledged.
func TestNodeWaitsForItsJournal(t *testing.T) {
	nodeWaitsForItsJournal(t, "inflight", outsideSessionSrc, "a")
}

// TestNodeWaitsForItsJournalInPipeline is the same in a durable pipeline
// whose node b reads outside envelopes while a holds its run open.
func TestNodeWaitsForItsJournalInPipeline(t *testing.T) {
	nodeWaitsForItsJournal(t, "inflight-pipeline", outsidePipelineSrc, "b")
}

func nodeWaitsForItsJournal(t *testing.T, id, src, node string) {
	const n, bound = 600, 100
	defer actors.SetMaxInflight(bound)()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := startOutside(t, id, src, n, nil)
	sys := r.s.System()
	release := r.holdJournal(t)
	require.NoError(t, r.send(ctx, node, n))
	// Every envelope reached the node (it holds each delivery), and the
	// node fired as far as it may.
	waitUntil(ctx, t, func() bool { return sys.Held() == n && r.count.Load() >= bound },
		func() string { return "not every delivery held, or fewer than the bound fired" })
	// The node's buffer, read on its actor after everything before: what
	// it did not fire waits there.
	var ready int
	for _, st := range sys.Buffers(ctx) {
		if st.Node == node {
			ready += st.Ready
		}
	}
	require.Equal(t, int64(bound), r.count.Load(), "fired past the bound while its journal was held")
	require.Equal(t, n-bound-1, ready, "the rest waits in the node's buffer (one taken as the next firing's input)")

	release()
	r.firesEachOnce(ctx, t, n)
}

// waitUntil waits for cond, a state no event announces, looking every
// millisecond until ctx ends (then the test fails with what says).
func waitUntil(ctx context.Context, t *testing.T, cond func() bool, what func() string) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatal(what())
		case <-time.After(time.Millisecond):
		}
	}
}
