package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/actors"
	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/nodes"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/scheduler"
	"github.com/switchyard/switchyard/session"
)

// explainUntil asks the session's explain subject about node until its
// answer contains want (or the deadline passes) and returns the answer.
func explainUntil(t *testing.T, l *live, node, want string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	last := ""
	for time.Now().Before(deadline) {
		reply, err := l.broker.Conn().Request(broker.Control(l.s.ID(), "explain"), []byte(`{"node":"`+node+`"}`), 10*time.Second)
		require.NoError(t, err)
		var r actors.ExplainReply
		require.NoError(t, json.Unmarshal(reply.Data, &r))
		last = r.Explain
		if strings.Contains(last, want) {
			return last
		}
		<-tick.C
	}
	t.Fatalf("explain %s never said %q; last: %s", node, want, last)
	return ""
}

// startLive starts cfg with its events recorded for waitEvent.
func startLive(t *testing.T, r *run, cfg session.Config) *live {
	t.Helper()
	events := make(chan *pb.Event, 10000)
	cfg.Observer = func(ev *pb.Event) { r.observe(ev); events <- ev }
	s, err := session.Start(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	return &live{run: r, s: s, events: events}
}

// TestBudgetRefusesEveryHeldEnvelope: envelopes that wait in a node's
// buffer while the run that spends its budget goes on are all refused,
// and acknowledged, when it ends — not one per later wake-up.
func TestBudgetRefusesEveryHeldEnvelope(t *testing.T) {
	r := newRun(t)
	cfg := r.durable(`digraph s { kind="session"; worker [type="custom.echo", budget_tokens=100] }`, "refuse1")
	started, release := make(chan struct{}, 4), make(chan struct{})
	require.NoError(t, cfg.Registry.Replace(nodes.Info{Type: "custom.echo", Handler: nodes.HandlerFunc(
		func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
			started <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			in.OnUsage(nodes.Usage{OutputTokens: 150})
			<-ctx.Done() // the budget cancels the run
			return nil, ctx.Err()
		})}))
	l := startLive(t, r, cfg)
	l.publish(t, broker.NodeIn(l.s.ID(), "worker"), "first")
	<-started
	for i := 1; i <= 3; i++ {
		l.publish(t, broker.NodeIn(l.s.ID(), "worker"), fmt.Sprint("more ", i))
	}
	explainUntil(t, l, "worker", "held=3")
	close(release)
	ev := l.waitEvent(t, "worker completed", completedBy("worker"))
	require.Equal(t, "fail", ev.Status)
	refused := map[string]bool{}
	for len(refused) < 3 {
		ev := l.waitEvent(t, "refusal", func(ev *pb.Event) bool { return ev.Kind == "node.refused" && ev.Node == "worker" })
		require.Contains(t, ev.Message, "budget")
		for _, kv := range ev.Attrs {
			if kv.Key == "envelopes" {
				for _, id := range strings.Split(kv.Value, ",") {
					refused[id] = true
				}
			}
		}
	}
	require.Len(t, refused, 3, "each envelope held is refused once")
	// Every message the node received is acknowledged (the session's
	// consumer reads for all its nodes).
	cons, err := l.broker.JetStream().Consumer(context.Background(), broker.StreamName(l.s.ID()), actors.ConsumerName)
	require.NoError(t, err)
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := cons.Info(context.Background())
		require.NoError(t, err)
		if info.NumAckPending == 0 && info.NumPending == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "still unacknowledged: %d pending acks", info.NumAckPending)
		time.Sleep(20 * time.Millisecond) // polling the server's count, not synchronising
	}
	require.Len(t, started, 0, "the refused envelopes never ran")
}

// TestTriggerMessageJoinsHeldEnvelopes: a trigger with a message fires
// the node with what it holds and the message; explain counts what waits
// in the node's buffers.
func TestTriggerMessageJoinsHeldEnvelopes(t *testing.T) {
	l := serve(t, `digraph s { kind="session"; m [prompt="m", trigger=manual] }`, "", nil)
	l.publish(t, broker.NodeIn(l.s.ID(), "m"), "a")
	l.publish(t, broker.NodeIn(l.s.ID(), "m"), "b")
	explainUntil(t, l, "m", "held=2")
	_, err := l.broker.Conn().Request(broker.Control(l.s.ID(), "trigger"), []byte(`{"node":"m","message":"note"}`), 10*time.Second)
	require.NoError(t, err)
	l.waitEvent(t, "m completed", completedBy("m"))
	require.Equal(t, 1, l.calls_("m"))
	require.Equal(t, []string{"handoff:a", "handoff:b", "control:note"}, l.inputsOf("m"))
	explainUntil(t, l, "m", "held=0")
}

// TestBudgetCrossedDuringRunFailsWithTheBudget: a handler that spends past
// its budget and returns without looking at its context fails the firing
// with the budget's reason.
func TestBudgetCrossedDuringRunFailsWithTheBudget(t *testing.T) {
	for _, tc := range []struct{ name, src string }{
		{"pipeline", `digraph p { start [shape=Mdiamond]; spend [type="custom.echo", budget_tokens=100]; exit [shape=Msquare]; start -> spend -> exit }`},
		{"session", `digraph s { kind="session"; spend [type="custom.echo", budget_tokens=100] }`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRun(t)
			cfg := r.config(r.load(tc.src))
			require.NoError(t, cfg.Registry.Replace(nodes.Info{Type: "custom.echo", Handler: nodes.HandlerFunc(
				func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
					in.OnUsage(nodes.Usage{OutputTokens: 150})
					<-ctx.Done() // the budget cancels the run; the handler finishes anyway
					return &nodes.Outcome{Status: nodes.StatusSuccess, Usage: nodes.Usage{OutputTokens: 150}}, nil
				})}))
			l := startLive(t, r, cfg)
			if tc.name == "session" {
				l.publish(t, broker.NodeIn(l.s.ID(), "spend"), "go")
			}
			ev := l.waitEvent(t, "spend completed", completedBy("spend"))
			require.Equal(t, "fail", ev.Status)
			require.Contains(t, ev.Message, "a budget was spent during the run")
			if tc.name == "pipeline" {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				rep, err := l.s.Wait(ctx)
				require.NoError(t, err)
				require.Equal(t, "fail", rep.Status)
				require.Contains(t, rep.Reason, "a budget was spent during the run")
				require.Equal(t, "spend", rep.FailedNode)
				require.ErrorIs(t, rep.Cause, scheduler.ErrBudgetExceeded)
			}
		})
	}
}

// TestBudgetStopRefusesWhatGatesHold: when a budget stops a node, the
// envelopes a manual gate or a join holds (in the gate or in the node's
// buffers) are refused — naming the budget, on record, acknowledged — at
// that moment, not at a trigger or wake-up that may never come. The time
// budget runs on the session's fake clock.
func TestBudgetStopRefusesWhatGatesHold(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		first     func(l *live) // makes the node fire once
		more      []string      // subjects of the envelopes sent while it runs
	}{
		{"manual", `digraph s { kind="session"; gate [type="custom.echo", trigger=manual, budget_time=1h] }`,
			func(l *live) {
				l.publish(t, broker.NodeIn(l.s.ID(), "gate"), "first")
				explainUntil(t, l, "gate", "held=1")
				require.NoError(t, l.s.System().Trigger("gate", nil))
			},
			[]string{"node.gate.in", "node.gate.in", "node.gate.in"}},
		{"join", `digraph s { kind="session"; a [type="custom.echo"]; b [type="custom.echo"]
			gate [type="custom.echo", trigger=all, budget_time=1h]; a -> gate; b -> gate }`,
			func(l *live) {
				l.publish(t, broker.Edge(l.s.ID(), "a.gate"), "a1")
				l.publish(t, broker.Edge(l.s.ID(), "b.gate"), "b1")
			},
			[]string{"edge.a.gate", "edge.a.gate", "edge.b.gate"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRun(t)
			clk := clock.NewFake(farFuture)
			cfg := r.config(r.load(tc.src))
			cfg.ID, cfg.Durable, cfg.LogsDir, cfg.Clock = "refuse-"+tc.name, true, "", clk
			started := make(chan string, 4)
			blockUntilDone(t, &cfg, started)
			l := startLive(t, r, cfg)
			tc.first(l)
			select {
			case <-started:
			case <-time.After(20 * time.Second):
				t.Fatal("the node never fired")
			}
			for i, subj := range tc.more {
				l.publish(t, "sy."+l.s.ID()+"."+subj, fmt.Sprint("more ", i))
			}
			explainUntil(t, l, "gate", fmt.Sprintf("held=%d", len(tc.more)))
			clk.Advance(time.Hour) // the time budget runs out: the run is cancelled and the node stopped
			ev := l.waitEvent(t, "gate completed", completedBy("gate"))
			require.Equal(t, "fail", ev.Status)
			refused := map[string]bool{}
			for len(refused) < len(tc.more) {
				ev := l.waitEvent(t, "refusal", func(ev *pb.Event) bool { return ev.Kind == "node.refused" && ev.Node == "gate" })
				require.Contains(t, ev.Message, "budget")
				for _, kv := range ev.Attrs {
					if kv.Key == "envelopes" {
						for _, id := range strings.Split(kv.Value, ",") {
							require.False(t, refused[id], "%s refused twice", id)
							refused[id] = true
						}
					}
				}
			}
			// Acknowledged: nothing of the node's input is left pending.
			cons, err := l.broker.JetStream().Consumer(context.Background(), broker.StreamName(l.s.ID()), actors.ConsumerName)
			require.NoError(t, err)
			deadline := time.Now().Add(20 * time.Second)
			for {
				info, err := cons.Info(context.Background())
				require.NoError(t, err)
				if info.NumAckPending == 0 && info.NumPending == 0 {
					break
				}
				require.True(t, time.Now().Before(deadline), "still unacknowledged: %d pending acks", info.NumAckPending)
				time.Sleep(20 * time.Millisecond) // polling the server's count, not synchronising
			}
			require.Len(t, started, 0, "the refused envelopes never ran")
		})
	}
}
