package session_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/nodes"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

const editV1 = `digraph live { kind="session"; stall_after=0
	src [type="custom.echo"]; a [type="custom.echo"]; old [type="custom.echo"]
	src -> a; src -> old }`

const editV2 = `digraph live { kind="session"; stall_after=0
	src [type="custom.echo"]; a [type="custom.echo", note="changed"]; neu [type="custom.echo"]
	src -> a; src -> neu }`

// TestLiveEditUnderStream adds a node and removes another while envelopes
// stream through, and accounts for every one of them.
func TestLiveEditUnderStream(t *testing.T) {
	r := newRun(t)
	g := r.load(editV1)
	cfg := r.config(g)
	var mu sync.Mutex
	got := map[string][]string{}
	require.NoError(t, cfg.Registry.Replace(nodes.Info{Type: "custom.echo", Handler: nodes.HandlerFunc(
		func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
			text := in.Messages[0].Text
			mu.Lock()
			got[in.Node.ID] = append(got[in.Node.ID], text)
			mu.Unlock()
			return &nodes.Outcome{Status: nodes.StatusSuccess, Response: text}, nil
		})}))
	var drops atomic.Int64
	events := make(chan *pb.Event, 10000)
	cfg.Observer = func(ev *pb.Event) {
		if ev.Kind == "envelope.dropped" {
			for _, kv := range ev.Attrs {
				if kv.Key == "envelopes" {
					drops.Add(int64(len(strings.Split(kv.Value, ","))))
				}
			}
		}
		r.observe(ev)
		events <- ev
	}
	s, err := session.Start(context.Background(), cfg)
	require.NoError(t, err)
	defer s.Stop()
	require.Equal(t, uint64(1), s.Version())
	l := &live{run: r, s: s, events: events}

	const n = 60
	count := func(node string) int {
		mu.Lock()
		defer mu.Unlock()
		return len(got[node])
	}
	for i := 0; i < n; i++ {
		l.publish(t, broker.NodeIn(s.ID(), "src"), fmt.Sprintf("m%02d", i))
		if i == n/2 {
			// Edit in the middle of the stream.
			_, _, err := s.Edit("bad.dot", []byte(`digraph live { kind="session"; src -> nowhere }`))
			require.ErrorIs(t, err, session.ErrInvalidEdit, "an invalid file changes nothing")
			require.Equal(t, uint64(1), s.Version())
			ed, _, err := s.Edit("v2.dot", []byte(editV2))
			require.NoError(t, err)
			require.Equal(t, uint64(2), ed.Version)
			require.Equal(t, []string{"neu"}, ed.Added)
			require.Equal(t, []string{"old"}, ed.Removed)
			require.Contains(t, ed.Changed, "a")
		}
	}
	edited := l.waitEvent(t, "session.edited", func(ev *pb.Event) bool { return ev.Kind == "session.edited" })
	require.Contains(t, edited.Message, "version 2")

	// Every envelope is accounted for: src and a saw all of them; each of
	// src's envelopes to the removed node was handled by it or reported
	// dropped, or went to the added node.
	accounted := func() bool {
		return count("src") == n && count("a") == n && count("old")+count("neu")+int(drops.Load()) == n
	}
	deadline := time.After(30 * time.Second)
	for !accounted() {
		select {
		case <-events:
		case <-deadline:
			t.Fatalf("not accounted for: src %d, a %d, old %d + new %d + dropped %d of %d",
				count("src"), count("a"), count("old"), count("neu"), drops.Load(), n)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for node, texts := range got {
		seen := map[string]bool{}
		for _, txt := range texts {
			require.False(t, seen[txt], "%s received %s twice", node, txt)
			seen[txt] = true
		}
	}
	require.NotEmpty(t, got["neu"], "the added node receives the stream after the edit")
	for _, txt := range got["old"] {
		require.NotContains(t, got["neu"], txt, "an envelope reached both the removed and the added node")
	}
}

// TestLiveEditRemovesHoldingJoin: a join node that holds an arrival (it
// waits for its other edge) is removed by a live edit; the envelope its
// gate held is reported dropped, not lost without a word.
func TestLiveEditRemovesHoldingJoin(t *testing.T) {
	const v1 = `digraph s { kind="session"; x [prompt="x"]; y [prompt="y"]; j [prompt="join", trigger=all]; x -> j; y -> j }`
	const v2 = `digraph s { kind="session"; x [prompt="x"]; y [prompt="y"] }`
	sv := serveSession(t, v1, nil)
	sv.pub("x", "work")
	sv.wait("gate.waiting", "j")
	ed, diags, err := sv.s.Edit("v2.dot", []byte(v2))
	require.NoError(t, err, "%v", diags)
	require.Equal(t, []string{"j"}, ed.Removed)
	sv.wait("node.removed", "j")
	var dropped []string
	for _, ev := range sv.seen {
		if ev.Kind == "envelope.dropped" && ev.Node == "j" {
			for _, kv := range ev.Attrs {
				if kv.Key == "envelopes" {
					dropped = append(dropped, strings.Split(kv.Value, ",")...)
				}
			}
		}
	}
	require.Len(t, dropped, 1, "x's envelope, held by j's gate, is reported dropped")
}
