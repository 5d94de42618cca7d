package session_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/nodes"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

// TestContinueTick: a node that is not done fires again with a tick
// (kind tick, from itself) until it is, keeping its agent thread; nothing
// goes downstream before.
func TestContinueTick(t *testing.T) {
	r := newRun(t)
	var mu sync.Mutex
	var seen []string
	r.reg = func(reg *nodes.Registry) {
		require.NoError(t, reg.Register(nodes.Info{Type: "custom.worker", Handler: nodes.HandlerFunc(
			func(_ context.Context, in *nodes.Input) (*nodes.Outcome, error) {
				mu.Lock()
				n := len(seen) + 1
				seen = append(seen, fmt.Sprintf("%s/%s", in.Messages[0].Kind, in.Context[nodes.ThreadKeyPrefix+"w"]))
				mu.Unlock()
				o := &nodes.Outcome{Status: nodes.StatusSuccess, Response: fmt.Sprint("step ", n),
					ContextUpdates: map[string]string{nodes.ThreadKeyPrefix + "w": "thread-1"}}
				if n < 3 {
					o.Continue = nodes.ContinueTick
				}
				return o, nil
			})}))
	}
	rep := r.exec(`digraph c { start [shape=Mdiamond]; w [type="custom.worker"]; after [type="custom.worker"]; exit [shape=Msquare]
		start -> w -> after -> exit }`)
	require.Equal(t, "success", rep.Status, rep.Reason)
	require.Equal(t, []string{"handoff/", "tick/thread-1", "tick/thread-1", "handoff/thread-1"}, seen)
	require.Equal(t, 3, rep.Node("w").Visits)
	require.Equal(t, []string{"start", "w", "w", "w", "after", "exit"}, r.visits())
}

// TestContinueWaitConversation: a node in a conversation waits for its
// next input after each reply; messages from outside (no context of
// their own) find the thread; the last one ends it and the run goes on.
func TestContinueWaitConversation(t *testing.T) {
	r := newRun(t)
	var mu sync.Mutex
	var turns []string
	r.reg = func(reg *nodes.Registry) {
		require.NoError(t, reg.Register(nodes.Info{Type: "custom.chat", Handler: nodes.HandlerFunc(
			func(_ context.Context, in *nodes.Input) (*nodes.Outcome, error) {
				text := in.Messages[0].Text
				mu.Lock()
				turns = append(turns, text+"@"+in.Context[nodes.ThreadKeyPrefix+"chat"])
				mu.Unlock()
				o := &nodes.Outcome{Status: nodes.StatusSuccess, Response: "re: " + text, Continue: nodes.ContinueWait,
					ContextUpdates: map[string]string{nodes.ThreadKeyPrefix + "chat": "t-9"}}
				if text == "bye" {
					o.Continue = ""
				}
				return o, nil
			})}))
	}
	g := r.load(`digraph c { start [shape=Mdiamond]; chat [type="custom.chat"]; exit [shape=Msquare]; start -> chat -> exit }`)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	completed := make(chan struct{}, 16)
	cfg := r.config(g)
	cfg.Observer = func(ev *pb.Event) {
		r.observe(ev)
		if ev.Kind == "node.completed" && ev.Node == "chat" {
			completed <- struct{}{}
		}
	}
	s, err := session.Start(ctx, cfg)
	require.NoError(t, err)
	defer s.Stop()
	say := func(text string) {
		<-completed // the previous turn is done: the node waits
		env := &pb.Envelope{Id: "msg." + text, Kind: "event", Payload: &pb.Payload{Message: text}}
		data, _ := proto.Marshal(env)
		require.NoError(t, r.broker.Conn().Publish(broker.NodeIn(s.ID(), "chat"), data))
	}
	say("hello")
	say("bye")
	rep, err := s.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status, rep.Reason)
	require.Equal(t, []string{"@", "hello@t-9", "bye@t-9"}, turns)
	require.Equal(t, []string{"start", "chat", "chat", "chat", "exit"}, r.visits())
}

// TestAutoModeStoppedByTheScheduler: an agent in auto mode that never says
// DONE keeps its thread turn after turn until the scheduler's limit stops
// it (here max_visits), and the run fails with that reason.
func TestAutoModeStoppedByTheScheduler(t *testing.T) {
	r := newRun(t)
	r.mock = `{"code": [{"response": "still working"}]}`
	rep := r.exec(`digraph c { start [shape=Mdiamond]; code [prompt="Fix it", mode=auto, max_visits=4, stall_after=0]; exit [shape=Msquare]
		start -> code -> exit }`)
	require.Equal(t, "fail", rep.Status)
	require.Contains(t, rep.Reason, "max_visits")
	require.Equal(t, 4, rep.Node("code").Visits)
	prompt := r.file("code", "prompt.md")
	require.Contains(t, prompt, "Continue the task (turn 4)")
	require.NotContains(t, prompt, "Fix it")
}
