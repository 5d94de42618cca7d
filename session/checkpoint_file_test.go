package session

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/nodes"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// A session that is not durable writes checkpoint.json off the firing
// path: while a write is held up, the nodes go on firing; the firings that
// ended meanwhile are saved together by the next write, and the end is
// written before the session completes. Every firing is still reported
// saved.
func TestFileCheckpointDoesNotHoldFirings(t *testing.T) {
	const n = 20
	release := make(chan struct{})
	var writes atomic.Int32
	var once sync.Once
	beforeFileWrite = func() {
		if writes.Add(1) == 2 { // the first is the input's, written by Start
			<-release
		}
	}
	t.Cleanup(func() { beforeFileWrite = nil; once.Do(func() { close(release) }) })

	var b strings.Builder
	b.WriteString("digraph chain { start [shape=Mdiamond]; exit [shape=Msquare]\n")
	prev := "start"
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "n%d [type=\"test.step\"]\n%s -> n%d\n", i, prev, i)
		prev = fmt.Sprintf("n%d", i)
	}
	fmt.Fprintf(&b, "%s -> exit }\n", prev)
	g, diags := graph.Load("chain.dot", []byte(b.String()), graph.WithKnownTypes(append(graph.BuiltinTypes, "test.step")...))
	require.False(t, diags.HasErrors(), diags.String())
	reg := nodes.NewRegistry()
	require.NoError(t, nodes.RegisterBuiltins(reg, nodes.Deps{}))
	require.NoError(t, reg.Register(nodes.Info{Type: "test.step", Handler: nodes.InlineFunc(
		func(context.Context, *nodes.Input) (*nodes.Outcome, error) {
			return &nodes.Outcome{Status: nodes.StatusSuccess}, nil
		})}))

	events := make(chan *pb.Event, 1000)
	logs := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Start(ctx, Config{Graph: g, Broker: brokertest.Start(t), Registry: reg, LogsDir: logs,
		Checkpoint: &CheckpointPolicy{Retain: true}, Observer: func(ev *pb.Event) { events <- ev }})
	require.NoError(t, err)
	defer s.Stop()

	// Every node before exit fires while the first write is held.
	last := fmt.Sprintf("n%d", n-1)
	for done := false; !done; {
		select {
		case ev := <-events:
			done = ev.Kind == "node.completed" && ev.Node == last
		case <-ctx.Done():
			t.Fatal("the nodes waited for checkpoint.json")
		}
	}
	once.Do(func() { close(release) })
	rep, err := s.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status)
	saved := map[string]bool{}
	for len(events) > 0 {
		if ev := <-events; ev.Kind == "checkpoint.saved" {
			saved[ev.Node] = true
		}
	}
	require.Len(t, saved, n+2, "every firing is reported saved: %v", saved)
	require.LessOrEqual(t, int(writes.Load()), 5, "the held-up firings were written together, not one by one")

	var cp Checkpoint
	data, err := os.ReadFile(filepath.Join(logs, "checkpoint.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &cp))
	require.Equal(t, "success", cp.Status, "the end is written")
	require.Len(t, cp.CompletedNodes, n+2)
}

// The session's final checkpoint write may overtake the background
// writer's (taken, not yet written): it reports the writer's firings saved
// itself, so every checkpoint.saved comes before session.completed — a
// watcher that stops at session.completed has seen them all.
func TestFileCheckpointSavedBeforeCompleted(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	var held atomic.Int32
	var overtaken atomic.Bool
	holds := make(chan struct{}) // the writer holds its first take
	afterWriterTake = func() {
		if held.Add(1) == 1 {
			close(holds)
			<-release // another write goes first
		}
	}
	beforeFileWrite = func() {
		if held.Load() == 1 {
			// The writer holds its take: this write is the final one.
			overtaken.Store(true)
			once.Do(func() { close(release) })
		}
	}
	t.Cleanup(func() {
		afterWriterTake, beforeFileWrite = nil, nil
		once.Do(func() { close(release) })
	})

	g, diags := graph.Load("chain.dot", []byte(`digraph chain { start [shape=Mdiamond]; exit [shape=Msquare]
		a [type="test.step"]; b [type="test.step"]; start -> a -> b -> exit }`),
		graph.WithKnownTypes(append(graph.BuiltinTypes, "test.step")...))
	require.False(t, diags.HasErrors(), diags.String())
	reg := nodes.NewRegistry()
	require.NoError(t, nodes.RegisterBuiltins(reg, nodes.Deps{}))
	require.NoError(t, reg.Register(nodes.Info{Type: "test.step", Handler: nodes.InlineFunc(
		func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
			if in.Node.ID == "a" {
				// a commits once the writer holds start's checkpoint, so
				// that the final write comes while it is held.
				select {
				case <-holds:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return &nodes.Outcome{Status: nodes.StatusSuccess}, nil
		})}))

	events := make(chan *pb.Event, 1000)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Start(ctx, Config{Graph: g, Broker: brokertest.Start(t), Registry: reg, LogsDir: t.TempDir(),
		Checkpoint: &CheckpointPolicy{Retain: true}, Observer: func(ev *pb.Event) { events <- ev }})
	require.NoError(t, err)
	rep, err := s.Wait(ctx) // completes while the writer holds its take
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status)
	require.True(t, overtaken.Load(), "the final write overtook the background writer's")

	saved := map[string]bool{}
	for completed := false; !completed; {
		select {
		case ev := <-events:
			if ev.Kind == "checkpoint.saved" {
				saved[ev.Node] = true
			}
			completed = ev.Kind == "session.completed"
		case <-ctx.Done():
			t.Fatal("no session.completed")
		}
	}
	s.Stop()
	require.Equal(t, map[string]bool{"start": true, "a": true, "b": true, "exit": true}, saved,
		"every firing is reported saved before session.completed")
	for len(events) > 0 {
		ev := <-events
		require.NotEqual(t, "checkpoint.saved", ev.Kind, "checkpoint.saved of %s after session.completed", ev.Node)
	}
}
