package session_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/nodes"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

// TestLiveEditRetries: a live edit that changes a node's max_retries
// takes effect at the node's next firing — the retry settings a node
// keeps from its first firing are read again for the edited node.
func TestLiveEditRetries(t *testing.T) {
	const v1 = `digraph retries { kind="session"; stall_after=0
		a [type="custom.flaky", max_retries=0] }`
	const v2 = `digraph retries { kind="session"; stall_after=0
		a [type="custom.flaky", max_retries=2] }`
	r := newRun(t)
	g := r.load(v1)
	cfg := r.config(g)
	var mu sync.Mutex
	attempts := map[string]int{} // message text -> attempts seen
	require.NoError(t, cfg.Registry.Replace(nodes.Info{Type: "custom.flaky", Handler: nodes.HandlerFunc(
		func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
			mu.Lock()
			attempts[in.Messages[0].Text]++
			mu.Unlock()
			return &nodes.Outcome{Status: nodes.StatusRetry, FailureReason: "flaky"}, nil
		})}))
	events := make(chan *pb.Event, 1000)
	cfg.Observer = func(ev *pb.Event) {
		r.observe(ev)
		events <- ev
	}
	s, err := session.Start(context.Background(), cfg)
	require.NoError(t, err)
	defer s.Stop()
	l := &live{run: r, s: s, events: events}
	completed := func(n int) {
		t.Helper()
		seen := 0
		deadline := time.After(30 * time.Second)
		for seen < n {
			select {
			case ev := <-events:
				if ev.Kind == "node.completed" && ev.Node == "a" {
					seen++
				}
			case <-deadline:
				t.Fatalf("node a completed %d firings of %d", seen, n)
			}
		}
	}
	count := func(text string) int {
		mu.Lock()
		defer mu.Unlock()
		return attempts[text]
	}

	l.publish(t, broker.NodeIn(s.ID(), "a"), "before")
	completed(1)
	require.Equal(t, 1, count("before"), "max_retries=0: one attempt")

	_, _, err = s.Edit("v2.dot", []byte(v2))
	require.NoError(t, err)
	l.publish(t, broker.NodeIn(s.ID(), "a"), "after")
	completed(1)
	require.Equal(t, 3, count("after"), "max_retries=2 after the edit: three attempts")
}
