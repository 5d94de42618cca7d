package actors

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/nodes"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// TestEventInterestAskedForTheQueue: the System's event goroutine asks
// whether anyone subscribes to an event's subjects once for the events
// queued when it asks (each emitted before the answer), and again for an
// event queued after it: a watcher that subscribed meanwhile gets that
// event.
func TestEventInterestAskedForTheQueue(t *testing.T) {
	b := brokertest.Start(t, brokertest.Memory())
	g, err := graph.Parse("t.dot", []byte(`digraph t { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }`))
	require.NoError(t, err)
	reg := nodes.NewRegistry()
	require.NoError(t, nodes.RegisterBuiltins(reg, nodes.Deps{}))
	const sid = "interest"
	var asked atomic.Int64
	hold := make(chan struct{}, 1)    // a message: OnEvent waits for the next release
	release := make(chan struct{}, 1) // lets a held OnEvent return
	taken := make(chan string, 16)    // the messages of the events OnEvent saw
	failed := make(chan struct{})     // closed when the test ends: nothing is held
	s, err := New(Config{SessionID: sid, Graph: g, Conn: b.Conn(), Registry: reg,
		Interest: func(subj string) bool {
			if strings.HasSuffix(subj, ".note") {
				asked.Add(1)
			}
			return b.Interest(subj)
		},
		Wants: func(kind string) bool { return kind == "note" }, // Emit asks nothing
		OnEvent: func(ev *pb.Event) {
			if ev.Kind != "note" {
				return
			}
			taken <- ev.Message
			select {
			case <-hold:
				select {
				case <-release:
				case <-failed:
				}
			default:
			}
		},
		Journal: JournalFunc(func(context.Context, *Commit) error { return nil })})
	require.NoError(t, err)
	defer s.Stop()
	defer close(failed) // before Stop, which waits for the event goroutine
	next := func(want string) {
		t.Helper()
		select {
		case got := <-taken:
			require.Equal(t, want, got)
		case <-time.After(10 * time.Second):
			t.Fatalf("event %s was not taken", want)
		}
	}

	// Five events queue while the first is held: the first asks for its
	// own two subjects, the second for the three behind it as well.
	hold <- struct{}{}
	s.Emit(&pb.Event{Kind: "note", Message: "1"})
	next("1")
	for _, m := range []string{"2", "3", "4", "5"} {
		s.Emit(&pb.Event{Kind: "note", Message: m})
	}
	require.Equal(t, int64(2), asked.Load())
	hold <- struct{}{} // held at "2", once the queue's answers are given
	release <- struct{}{}
	next("2")
	require.Equal(t, int64(4), asked.Load(), "the answers for 2 hold for 3, 4 and 5")

	// A watcher subscribes while "3".."5" are queued; an event emitted
	// after it gets a new answer and reaches it.
	watcher, err := b.NewConn()
	require.NoError(t, err)
	defer watcher.Close()
	sub, err := watcher.SubscribeSync(broker.Event(sid, "note"))
	require.NoError(t, err)
	require.NoError(t, watcher.Flush())
	s.Emit(&pb.Event{Kind: "note", Message: "6"})
	release <- struct{}{}
	for _, m := range []string{"3", "4", "5", "6"} {
		next(m)
	}
	m, err := sub.NextMsg(10 * time.Second)
	require.NoError(t, err)
	ev := &pb.Event{}
	require.NoError(t, proto.Unmarshal(m.Data, ev))
	require.Equal(t, "6", ev.Message, "the first event the watcher gets is the one emitted after it subscribed")
	require.Equal(t, int64(6), asked.Load(), "asked again for 6 only")
}
