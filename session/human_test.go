package session_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/nodes/agent"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

const gateSrc = `digraph gate {
	start [shape=Mdiamond]
	review [shape=hexagon, label="Ship it?", timeout=1h, human.default_choice="R"]
	ship [prompt="ship"]
	revise [prompt="revise"]
	exit [shape=Msquare]
	start -> review
	review -> ship [label="[A] Approve"]
	review -> revise [label="[R] Revise"]
	ship -> exit
	revise -> exit
}`

// startGate runs the gate pipeline with answers coming on the control
// subject; questions are delivered on the returned channel.
func startGate(t *testing.T, clk clock.Clock) (*run, *session.Session, chan *pb.Event) {
	r := newRun(t)
	g := r.load(gateSrc)
	questions := make(chan *pb.Event, 4)
	cfg := session.Config{Graph: g, Broker: r.broker, LogsDir: r.logs, Clock: clk,
		Deps: nodes.Deps{Providers: func(string) (agent.Provider, error) { return agent.NewMock(nil), nil }},
		Observer: func(ev *pb.Event) {
			r.observe(ev)
			if ev.Kind == "human.question" {
				questions <- ev
			}
		}}
	s, err := session.Start(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	return r, s, questions
}

func waitQuestion(t *testing.T, questions chan *pb.Event) *pb.Event {
	select {
	case q := <-questions:
		return q
	case <-time.After(20 * time.Second):
		t.Fatal("no human.question event")
		return nil
	}
}

func TestAnswerOnControlSubject(t *testing.T) {
	r, s, questions := startGate(t, nil)
	q := waitQuestion(t, questions)
	require.Equal(t, "review", q.Node)
	require.Equal(t, "Ship it?", q.Message)
	var opts []string
	for _, kv := range q.Attrs {
		opts = append(opts, kv.Key+"="+kv.Value)
	}
	require.Contains(t, opts, "option.A=[A] Approve")

	// An answer from another connection, as `switchyard answer` sends it.
	nc, err := r.broker.NewConn()
	require.NoError(t, err)
	defer nc.Close()
	data, _ := json.Marshal(session.AnswerMessage{Node: "review", Choice: "A", By: "alice"})
	require.NoError(t, nc.Publish(broker.Control(s.ID(), "answer"), data))

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rep, err := s.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status, rep.Reason)
	require.NotNil(t, rep.Node("ship"))
	require.Nil(t, rep.Node("revise"))
	require.Equal(t, "alice", r.event("human.answer", "review").Attrs[0].Value)
	require.Contains(t, r.file("checkpoint.json"), `"human.gate.answered_by": "alice"`)
}

func TestAnswerTimeoutTakesDefault(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	_, s, questions := startGate(t, clk)
	waitQuestion(t, questions)
	// The question's timer is armed on the fake clock: an hour passes.
	deadline := time.After(20 * time.Second)
	for {
		changed := clk.Changed()
		if clk.Pending() > 0 {
			break
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatal("the question armed no timer")
		}
	}
	clk.Advance(time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rep, err := s.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status, rep.Reason)
	require.NotNil(t, rep.Node("revise"), "the default choice R was taken")
}
