package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/actors"
	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/nodes/agent"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

// served is a reactive session on the real runtime, its events on a
// channel as well as recorded.
type served struct {
	*run
	s      *session.Session
	events chan *pb.Event
	seen   []*pb.Event
}

func serveSession(t *testing.T, src string, edit func(*session.Config)) *served {
	t.Helper()
	r := newRun(t)
	g, diags := graph.Load("test.dot", []byte(src), graph.AsSession())
	require.False(t, diags.HasErrors(), "%v", diags)
	sv := &served{run: r, events: make(chan *pb.Event, 1<<16)}
	cfg := session.Config{Graph: g, Broker: r.broker, LogsDir: r.logs, ControlAnswers: true,
		Deps: nodes.Deps{Providers: func(string) (agent.Provider, error) { return agent.NewMock(nil), nil }, DefaultProvider: "mock"},
		Observer: func(ev *pb.Event) {
			r.observe(ev)
			sv.events <- ev
		}}
	if edit != nil {
		edit(&cfg)
	}
	s, err := session.Start(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	sv.s = s
	return sv
}

// wait returns the next event of kind at node ("" any), waiting up to 20s.
func (sv *served) wait(kind, node string) *pb.Event {
	sv.t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev := <-sv.events:
			sv.seen = append(sv.seen, ev)
			if ev.Kind == kind && (node == "" || ev.Node == node) {
				return ev
			}
		case <-timeout:
			sv.t.Fatalf("no %s event at %q", kind, node)
		}
	}
}

// count counts the events of kind at node seen by wait so far.
func (sv *served) count(kind, node string) int {
	n := 0
	for _, ev := range sv.seen {
		if ev.Kind == kind && (node == "" || ev.Node == node) {
			n++
		}
	}
	return n
}

func (sv *served) pub(node, text string) {
	sv.t.Helper()
	env := &pb.Envelope{Id: "test-" + node + "-" + text, Kind: "handoff", ToNode: node, Payload: &pb.Payload{Message: text}}
	require.NoError(sv.t, sv.s.System().Send(context.Background(), broker.NodeIn(sv.s.ID(), node), env))
}

func (sv *served) answer(node, choice string) session.AnswerReply {
	sv.t.Helper()
	nc, err := sv.broker.NewConn()
	require.NoError(sv.t, err)
	defer nc.Close()
	data, _ := json.Marshal(session.AnswerMessage{Node: node, Choice: choice, By: "test"})
	msg, err := nc.Request(broker.Control(sv.s.ID(), "answer"), data, 20*time.Second)
	require.NoError(sv.t, err)
	var r session.AnswerReply
	require.NoError(sv.t, json.Unmarshal(msg.Data, &r))
	return r
}

// TestSessionGateRoutesByAnswer: a human gate in a session sends its
// answer down the chosen edge only; an answer that matches no option is
// refused with the options and the question stays open.
func TestSessionGateRoutesByAnswer(t *testing.T) {
	sv := serveSession(t, `digraph team {
		ask [shape=hexagon, label="Deploy?"]
		yes [prompt="deploy"]
		no  [prompt="roll back"]
		ask -> yes [label="[Y] Yes"]
		ask -> no  [label="[N] No"]
	}`, nil)
	sv.pub("ask", "build 42 is green")
	sv.wait("human.question", "ask")

	r := sv.answer("ask", "maybe")
	require.False(t, r.OK)
	require.Contains(t, r.Error, `"maybe" matches no option of human gate ask: choose one of [Y] Yes (yes), [N] No (no)`)
	require.Equal(t, []string{"[Y] Yes (yes)", "[N] No (no)"}, r.Options)
	require.Contains(t, sv.wait("human.answer.refused", "ask").Message, "maybe")
	r = sv.answer("yes", "Y")
	require.False(t, r.OK)
	require.Contains(t, r.Error, "node yes is not a human gate")

	require.True(t, sv.answer("ask", "N").OK)
	sv.wait("node.completed", "no")
	// The gate's events all come before its outputs: by now every edge it
	// selected is on record.
	require.Equal(t, 1, sv.count("edge.selected", "ask"), "only the chosen edge")
	for _, ev := range sv.seen {
		if ev.Kind == "edge.selected" && ev.Node == "ask" {
			require.Equal(t, "ask.no", ev.EdgeId)
		}
		require.False(t, ev.Kind == "node.started" && ev.Node == "yes", "the Yes branch never runs")
	}
}

// TestUnknownTargetsRefused: an envelope for a node or an edge the session
// does not have is refused visibly: an envelope.rejected event naming what
// exists, the envelope on sy.<session>.dlq, an error reply to a request.
// TestVerdicts: an envelope published with a VerdictHeader gets the
// session's verdict on the inbox it names — ok and delivered for a node's
// subject, the reason for a subject the session does not have — from the
// subscriptions that deliver (a session that is not durable).
func TestVerdicts(t *testing.T) {
	sv := serveSession(t, `digraph s { a [prompt="a"]; b [prompt="b"]; a -> b }`, nil)
	nc, err := sv.broker.NewConn()
	require.NoError(t, err)
	defer nc.Close()
	inbox := nc.NewRespInbox()
	verdicts, err := nc.SubscribeSync(inbox)
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	publish := func(subj string) actors.Verdict {
		t.Helper()
		m := nats.NewMsg(subj)
		m.Data = []byte(`{"payload":{"message":"hi"}}`)
		m.Header.Set(broker.VerdictHeader, inbox)
		require.NoError(t, nc.PublishMsg(m))
		got, err := verdicts.NextMsg(20 * time.Second)
		require.NoError(t, err)
		var v actors.Verdict
		require.NoError(t, json.Unmarshal(got.Data, &v))
		return v
	}
	require.Equal(t, actors.Verdict{OK: true, Session: sv.s.ID()}, publish(broker.Edge(sv.s.ID(), "a.b")))
	sv.wait("node.completed", "b")
	v := publish(broker.NodeIn(sv.s.ID(), "ghost"))
	require.False(t, v.OK)
	require.Contains(t, v.Error, "no node ghost")
	sv.wait("envelope.rejected", "")
}

func TestUnknownTargetsRefused(t *testing.T) {
	sv := serveSession(t, `digraph s { a [prompt="a"]; b [prompt="b"]; a -> b }`, nil)
	nc, err := sv.broker.NewConn()
	require.NoError(t, err)
	defer nc.Close()
	dlq, err := nc.SubscribeSync(broker.DeadLetter(sv.s.ID()))
	require.NoError(t, err)
	require.NoError(t, nc.Flush())

	require.JSONEq(t, `{"ok":false,"session":"`+sv.s.ID()+`","error":{"code":404,"err_code":0,"description":"no node ghost in session `+sv.s.ID()+` (its nodes: a, b)"}}`, refusal(t, nc, broker.NodeIn(sv.s.ID(), "ghost")))
	require.Contains(t, sv.wait("envelope.rejected", "").Message, "no node ghost")
	dead, err := dlq.NextMsg(20 * time.Second)
	require.NoError(t, err)
	require.Contains(t, string(dead.Data), "boo")

	require.Contains(t, refusal(t, nc, broker.Edge(sv.s.ID(), "b.a")), "no edge b:a in session "+sv.s.ID()+" (its edges: a:b)")

	// A known target is delivered as ever.
	require.NoError(t, nc.Publish(broker.Edge(sv.s.ID(), "a.b"), []byte(`{"payload":{"message":"fine"}}`)))
	sv.wait("node.completed", "b")
}

// TestCronThirtyDays: a node scheduled every minute in a session runs for
// a simulated 30 days on the injectable clock: 43,200 firings, each at its
// minute mark, none refused, no limit reached, no stall.
func TestCronThirtyDays(t *testing.T) {
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	fired := make(chan time.Time, 1)
	digest := nodes.HandlerFunc(func(context.Context, *nodes.Input) (*nodes.Outcome, error) {
		fired <- clk.Now()
		return &nodes.Outcome{Status: nodes.StatusSuccess, Response: "the same digest"}, nil
	})
	var refused atomic.Int64
	sv := serveSession(t, `digraph cron { digest [type="test.digest", trigger=schedule, schedule="* * * * *"] }`, func(c *session.Config) {
		c.Clock = clk
		c.Handlers = map[string]nodes.Handler{"test.digest": digest}
		c.Checkpoint = &session.CheckpointPolicy{Every: time.Hour} // a checkpoint an hour, as a long session would
		obs := c.Observer
		c.Observer = func(ev *pb.Event) {
			switch ev.Kind {
			case "node.refused", "iterations.exceeded", "iterations.waiting", "stall.detected", "budget.exceeded":
				refused.Add(1)
				obs(ev)
			}
		}
	})
	// The cron timer is armed once the session started.
	waitPending(t, clk)
	const firings = 30 * 24 * 60
	for i := 1; i <= firings; i++ {
		clk.Advance(time.Minute)
		select {
		case at := <-fired:
			require.Equal(t, start.Add(time.Duration(i)*time.Minute), at, "firing %d is at its minute mark", i)
		case <-time.After(20 * time.Second):
			t.Fatalf("firing %d did not happen; refusals: %d; %s", i, refused.Load(), sv.s.System().Explain("digest").Explain)
		}
		if i%1000 == 0 {
			waitPending(t, clk) // the next minute is armed (it is, long before a thousand)
		}
	}
	require.Zero(t, refused.Load(), "no firing refused, no limit, no stall")
	st, _ := sv.s.System().Scheduler().State("digest")
	require.NotEqual(t, "stopped", st.State)
}

// waitPending waits (with a deadline) until the fake clock has a timer.
func waitPending(t *testing.T, clk *clock.Fake) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for clk.Pending() == 0 {
		changed := clk.Changed()
		if clk.Pending() > 0 {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatal("no timer armed")
		}
	}
}

// echoFlood starts a durable session id of one echo node and fires it n
// times, each on an envelope of its own; hold runs before the first one.
func echoFlood(t *testing.T, b *broker.Broker, id string, n int, hold func(*session.Session)) *session.Session {
	t.Helper()
	g, diags := graph.Load("j.dot", []byte(`digraph j { kind=session; a [type="test.echo"] }`))
	require.False(t, diags.HasErrors(), "%v", diags)
	done := make(chan struct{}, n)
	echo := nodes.HandlerFunc(func(_ context.Context, in *nodes.Input) (*nodes.Outcome, error) {
		return &nodes.Outcome{Status: nodes.StatusSuccess, Response: nodes.InputText(in.Messages)}, nil
	})
	s, err := session.Start(context.Background(), session.Config{ID: id, Graph: g, Broker: b, Durable: true,
		Handlers: map[string]nodes.Handler{"test.echo": echo},
		Observer: func(ev *pb.Event) {
			if ev.Kind == "node.completed" {
				done <- struct{}{}
			}
		}})
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	if hold != nil {
		hold(s)
	}
	for i := 0; i < n; i++ {
		env := &pb.Envelope{Id: fmt.Sprintf("%s-%d", id, i), Kind: "handoff", Payload: &pb.Payload{Message: fmt.Sprintf("event %d", i)}}
		require.NoError(t, s.System().Send(context.Background(), broker.NodeIn(id, "a"), env))
	}
	for i := 0; i < n; i++ {
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("%d of %d firings", i, n)
		}
	}
	return s
}

// TestJournalCompactedAtStop: an upkeep skipped because the one before it
// still ran is not lost when nothing comes after it: stopping the session
// compacts its journal (the store stays bounded however the upkeeps fell).
func TestJournalCompactedAtStop(t *testing.T) {
	defer session.SetJournalKeep(50, 64)()
	b := brokertest.Start(t)
	var release func()
	s := echoFlood(t, b, "jstop", 300, func(s *session.Session) {
		release = session.HoldUpkeep(s) // every upkeep due is skipped
	})
	release()
	s.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	hist, err := session.History(ctx, b, "jstop")
	require.NoError(t, err)
	require.LessOrEqual(t, len(hist), 50+64+64, "the stop compacted the journal")
	require.Greater(t, hist[0].Seq, uint64(1))
}

// TestJournalCompaction: a durable session keeps the last JournalKeep
// journal records, not one per commit forever; its history and its latest
// checkpoint stay readable, and a checkpoint no longer kept is refused
// with the reason.
func TestJournalCompaction(t *testing.T) {
	defer session.SetJournalKeep(50, 64)()
	b := brokertest.Start(t)
	const n = 300
	s := echoFlood(t, b, "jc", n, nil)
	// Compaction runs beside the writes: a stopped session has finished it.
	s.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	hist, err := session.History(ctx, b, "jc")
	require.NoError(t, err)
	// Kept: the last 50 records from the start of the entry holding the
	// 50th last (entries hold up to 64 records), and at most 64 written
	// since the last compaction — one that found the one before it still
	// running and left its work to the next is done by the stop if no
	// later one did it (under load, 243 records were kept before).
	require.LessOrEqual(t, len(hist), 50+64+64, "older records were compacted")
	require.Greater(t, hist[0].Seq, uint64(1))
	cp, err := session.LoadCheckpoint(ctx, b, "jc", 0)
	require.NoError(t, err)
	require.GreaterOrEqual(t, cp.Seq, uint64(n), "the latest state is whole")
	require.Equal(t, hist[len(hist)-1].Seq, cp.Seq)
	_, err = session.LoadCheckpoint(ctx, b, "jc", 5)
	require.ErrorContains(t, err, "checkpoint 5 is no longer kept")
}

// TestJournalKeepOfTheBroker: a broker's JournalKeep (serve
// --journal-keep) says how many records its sessions keep, over the
// package's default.
func TestJournalKeepOfTheBroker(t *testing.T) {
	defer session.SetJournalKeep(50, 64)()
	b := brokertest.Start(t, brokertest.Configure(func(c *broker.Config) { c.JournalKeep = 300 }))
	const n = 900
	s := echoFlood(t, b, "jkeep", n, nil)
	s.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	hist, err := session.History(ctx, b, "jkeep")
	require.NoError(t, err)
	require.Greater(t, hist[0].Seq, uint64(1), "older records were compacted")
	require.GreaterOrEqual(t, len(hist), 300, "the broker's 300 records are kept, not the default's 50")
	require.LessOrEqual(t, len(hist), 300+64+64)
}

// TestSessionStallRule end to end: an agent that acknowledges different
// events with the same reply is not stalled, nor is one that gets the same
// text three times from outside (three events: three roots) — it goes on
// handling events; a loop that comes back with the same input and the
// same reply three times in a row is.
func TestSessionStallRule(t *testing.T) {
	ack := nodes.HandlerFunc(func(context.Context, *nodes.Input) (*nodes.Outcome, error) {
		return &nodes.Outcome{Status: nodes.StatusSuccess, Response: "ok"}, nil
	})
	sv := serveSession(t, `digraph s { a [type="test.ack"]; p [type="test.ack"]; q [type="test.ack"]; p -> q; q -> p }`, func(c *session.Config) {
		c.Handlers = map[string]nodes.Handler{"test.ack": ack}
	})
	for i := 0; i < 10; i++ {
		sv.pub("a", fmt.Sprintf("alert %d", i))
		sv.wait("node.completed", "a")
	}
	require.Zero(t, sv.count("stall.detected", ""), "different events, the same acknowledgement: progress")
	for i := 0; i < 3; i++ {
		env := &pb.Envelope{Id: fmt.Sprintf("same-%d", i), Kind: "handoff", Payload: &pb.Payload{Message: "alert 42"}}
		require.NoError(t, sv.s.System().Send(context.Background(), broker.NodeIn(sv.s.ID(), "a"), env))
		sv.wait("node.completed", "a")
	}
	sv.pub("a", "alert 43")
	sv.wait("node.completed", "a")
	require.Zero(t, sv.count("stall.detected", ""), "the same text three times from outside: three events")
	require.Zero(t, sv.count("node.refused", ""))

	sv.pub("p", "start the loop")
	ev := sv.wait("stall.detected", "")
	require.Contains(t, ev.Message, "stalled: the same input and the same result 3 times in a row")
}
