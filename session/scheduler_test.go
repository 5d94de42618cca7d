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
	"google.golang.org/protobuf/proto"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/nodes/agent"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

// live is a reactive session under test, with its events on a channel.
type live struct {
	*run
	s      *session.Session
	events chan *pb.Event
	calls  sync.Map // node -> *atomic.Int32
	inputs sync.Map // node -> []string of message texts, guarded by mu
	mu     sync.Mutex
	used   map[uint64]bool // events already returned by waitEvent
}

// serve starts src as a reactive session whose agent nodes record their
// inputs and succeed (or what the mock script says).
func serve(t *testing.T, src, mock string, clk clock.Clock) *live {
	t.Helper()
	r := newRun(t)
	r.mock = mock
	l := &live{run: r, events: make(chan *pb.Event, 10000)}
	g := r.load(src)
	cfg := r.config(g)
	cfg.Clock = clk
	inner := cfg.Registry
	reg := nodes.NewRegistry()
	for _, typ := range inner.Types() {
		h, _ := inner.Lookup(typ)
		if typ == "codergen" {
			h = l.recording(h)
		}
		require.NoError(t, reg.Register(nodes.Info{Type: typ, Handler: h}))
	}
	cfg.Registry = reg
	cfg.Observer = func(ev *pb.Event) {
		r.observe(ev)
		l.events <- ev
	}
	s, err := session.Start(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	l.s = s
	return l
}

func (l *live) recording(h nodes.Handler) nodes.Handler {
	return nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
		c, _ := l.calls.LoadOrStore(in.Node.ID, &atomic.Int32{})
		c.(*atomic.Int32).Add(1)
		l.mu.Lock()
		var texts []string
		if v, ok := l.inputs.Load(in.Node.ID); ok {
			texts = v.([]string)
		}
		for _, m := range in.Messages {
			texts = append(texts, m.Kind+":"+m.Text)
		}
		l.inputs.Store(in.Node.ID, texts)
		l.mu.Unlock()
		return h.Handle(ctx, in)
	})
}

func (l *live) calls_(node string) int {
	c, ok := l.calls.Load(node)
	if !ok {
		return 0
	}
	return int(c.(*atomic.Int32).Load())
}

func (l *live) inputsOf(node string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, _ := l.inputs.Load(node)
	out, _ := v.([]string)
	return append([]string(nil), out...)
}

// publish sends an outside message to a node's inbox or an edge subject.
func (l *live) publish(t *testing.T, subject, text string) {
	t.Helper()
	env := &pb.Envelope{Id: fmt.Sprintf("%s.%d", subject, time.Now().UnixNano()), Kind: "handoff", Payload: &pb.Payload{Message: text}}
	data, _ := proto.Marshal(env)
	require.NoError(t, l.broker.Conn().Publish(subject, data))
	require.NoError(t, l.broker.Conn().Flush())
}

// waitEvent returns the first event matching f that no earlier waitEvent
// returned, waiting for it if it has not happened yet.
func (l *live) waitEvent(t *testing.T, what string, f func(*pb.Event) bool) *pb.Event {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		l.mu.Lock()
		if l.used == nil {
			l.used = map[uint64]bool{}
		}
		l.mu.Unlock()
		l.run.mu.Lock()
		var found *pb.Event
		for _, ev := range l.run.events {
			if !l.used[ev.Seq] && f(ev) {
				found = ev
				break
			}
		}
		l.run.mu.Unlock()
		if found != nil {
			l.mu.Lock()
			l.used[found.Seq] = true
			l.mu.Unlock()
			return found
		}
		select {
		case <-l.events:
		case <-deadline:
			t.Fatalf("no %s event", what)
			return nil
		}
	}
}

func completedBy(node string) func(*pb.Event) bool {
	return func(ev *pb.Event) bool { return ev.Kind == "node.completed" && ev.Node == node }
}

func TestTriggerAnyFiresPerEnvelope(t *testing.T) {
	l := serve(t, `digraph s { kind="session"; a [prompt="a"] }`, "", nil)
	for i := 0; i < 3; i++ {
		l.publish(t, broker.NodeIn(l.s.ID(), "a"), fmt.Sprint("m", i))
		l.waitEvent(t, "a completed", completedBy("a"))
	}
	require.Equal(t, []string{"handoff:m0", "handoff:m1", "handoff:m2"}, l.inputsOf("a"))
}

func TestJoinAcrossThreeUpstreamNodes(t *testing.T) {
	l := serve(t, `digraph s { kind="session"
		a [prompt="a"]; b [prompt="b"]; c [prompt="c"]; j [prompt="join", trigger=all]
		a -> j; b -> j; c -> j }`, `{"a":[{"response":"from a"}],"b":[{"response":"from b"}],"c":[{"response":"from c"}]}`, nil)
	l.publish(t, broker.NodeIn(l.s.ID(), "a"), "go")
	l.publish(t, broker.NodeIn(l.s.ID(), "b"), "go")
	l.waitEvent(t, "b completed", completedBy("b"))
	l.waitEvent(t, "j waiting", func(ev *pb.Event) bool { return ev.Kind == "gate.waiting" && ev.Node == "j" })
	require.Equal(t, 0, l.calls_("j"), "the join waits for c")
	l.publish(t, broker.NodeIn(l.s.ID(), "c"), "go")
	l.waitEvent(t, "j completed", completedBy("j"))
	require.ElementsMatch(t, []string{"handoff:from a", "handoff:from b", "handoff:from c"}, l.inputsOf("j"), "fired once with all of them")
	require.Equal(t, 1, l.calls_("j"))
}

func TestManualTriggerOnControlSubject(t *testing.T) {
	l := serve(t, `digraph s { kind="session"; src [prompt="s"]; m [prompt="m", trigger=manual]; src -> m }`, "", nil)
	l.publish(t, broker.NodeIn(l.s.ID(), "src"), "x")
	l.waitEvent(t, "src completed", completedBy("src"))
	l.waitEvent(t, "m waiting", func(ev *pb.Event) bool { return ev.Kind == "gate.waiting" && ev.Node == "m" })
	require.Equal(t, 0, l.calls_("m"))
	reply, err := l.broker.Conn().Request(broker.Control(l.s.ID(), "explain"), []byte(`{"node":"m"}`), 10*time.Second)
	require.NoError(t, err)
	require.Contains(t, string(reply.Data), "manual trigger pending")
	_, err = l.broker.Conn().Request(broker.Control(l.s.ID(), "trigger"), []byte(`{"node":"m"}`), 10*time.Second)
	require.NoError(t, err)
	l.waitEvent(t, "m completed", completedBy("m"))
	require.Equal(t, 1, l.calls_("m"))
}

func TestCronNodeFiresThreeTimes(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	l := serve(t, `digraph s { kind="session"; tick [prompt="check the build", trigger=schedule, schedule="@every 1m"] }`, "", clk)
	for i := 1; i <= 3; i++ {
		clk.Advance(time.Minute)
		l.waitEvent(t, "tick completed", completedBy("tick"))
	}
	require.Equal(t, 3, l.calls_("tick"))
	require.Equal(t, []string{"tick:", "tick:", "tick:"}, l.inputsOf("tick"), "each firing is a tick envelope")
}

func TestDeliveryModes(t *testing.T) {
	t.Run("latest keeps the newest", func(t *testing.T) {
		// m is manual: envelopes pile up on its latest edge until the trigger.
		l := serve(t, `digraph s { kind="session"; src [type="tool", tool_command="echo $SWITCHYARD_NODE"]; m [prompt="m", trigger=manual]; src -> m [delivery=latest] }`, "", nil)
		for i := 0; i < 3; i++ {
			l.publish(t, broker.Edge(l.s.ID(), "src.m"), fmt.Sprint("v", i))
		}
		l.waitEvent(t, "drop", func(ev *pb.Event) bool { return ev.Kind == "envelope.dropped" && ev.Node == "m" })
		_ = l.s.System().Trigger("m", nil)
		l.waitEvent(t, "m completed", completedBy("m"))
		got := l.inputsOf("m")
		require.NotContains(t, got, "handoff:v0", "older envelopes were dropped")
	})
	t.Run("debounce waits for quiet", func(t *testing.T) {
		clk := clock.NewFake(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
		l := serve(t, `digraph s { kind="session"; src [prompt="s"]; d [prompt="d"]; src -> d [delivery=debounce, debounce=2s] }`, "", clk)
		for i := 0; i < 3; i++ {
			l.publish(t, broker.Edge(l.s.ID(), "src.d"), fmt.Sprint("burst", i))
		}
		// Wait until the burst is held (three drops or holds), then let 2s pass.
		l.waitEvent(t, "drops", func(ev *pb.Event) bool {
			if ev.Kind != "envelope.dropped" {
				return false
			}
			for _, kv := range ev.Attrs {
				if kv.Key == "dropped_total" && kv.Value == "2" {
					return true
				}
			}
			return false
		})
		require.Equal(t, 0, l.calls_("d"))
		clk.Advance(2 * time.Second)
		l.waitEvent(t, "d completed", completedBy("d"))
		require.Equal(t, []string{"handoff:burst2"}, l.inputsOf("d"), "only the newest, once")
	})
	t.Run("queue keeps all in order", func(t *testing.T) {
		l := serve(t, `digraph s { kind="session"; src [prompt="s"]; q [prompt="q"]; src -> q }`, "", nil)
		for i := 0; i < 5; i++ {
			l.publish(t, broker.Edge(l.s.ID(), "src.q"), fmt.Sprint("e", i))
		}
		for i := 0; i < 5; i++ {
			l.waitEvent(t, "q completed", completedBy("q"))
		}
		require.Equal(t, []string{"handoff:e0", "handoff:e1", "handoff:e2", "handoff:e3", "handoff:e4"}, l.inputsOf("q"))
	})
}

func TestCycleStoppedByMaxIterations(t *testing.T) {
	l := serve(t, `digraph s { kind="session"; stall_after=0
		a [prompt="a", max_iterations=4]; b [prompt="b", max_iterations=4]
		a -> b; b -> a }`, "", nil)
	l.publish(t, broker.NodeIn(l.s.ID(), "a"), "start the conversation")
	l.waitEvent(t, "iterations.exceeded", func(ev *pb.Event) bool { return ev.Kind == "iterations.exceeded" })
	l.waitEvent(t, "refusal", func(ev *pb.Event) bool { return ev.Kind == "node.refused" })
	require.Equal(t, 4, l.calls_("a"))
	require.Equal(t, 4, l.calls_("b"))
}

func TestTokenBudgetStopsAgentLoop(t *testing.T) {
	l := serve(t, `digraph s { kind="session"; stall_after=0
		worker [prompt="work", budget_tokens=1000]
		worker -> worker }`,
		`{"worker":[{"status":"success","response":"step","usage":{"input_tokens":200,"output_tokens":100,"cost":0.01}}]}`, nil)
	l.publish(t, broker.NodeIn(l.s.ID(), "worker"), "go")
	l.waitEvent(t, "80%", func(ev *pb.Event) bool { return ev.Kind == "budget.threshold" })
	ev := l.waitEvent(t, "exceeded", func(ev *pb.Event) bool { return ev.Kind == "budget.exceeded" })
	require.Contains(t, ev.Message, "tokens budget of node worker")
	// The 4th run's tokens cross the budget: reported during the run, they
	// cancel it (a failed firing, which goes no further), else its output
	// loops back and is refused. Either way the node takes nothing more.
	l.publish(t, broker.NodeIn(l.s.ID(), "worker"), "more")
	l.waitEvent(t, "refusal", func(ev *pb.Event) bool { return ev.Kind == "node.refused" && ev.Node == "worker" })
	require.Equal(t, 4, l.calls_("worker"), "300 tokens a run: the 4th run crosses 1000, nothing runs after it")
}

func TestStallDetectedInSession(t *testing.T) {
	// A poller that retries its failures along a failure edge, failing
	// the same way every time.
	l := serve(t, `digraph s { kind="session"; poll [prompt="poll"]; poll -> poll [condition="outcome=fail"] }`,
		`{"poll":[{"status":"fail","notes":"x","response":"connection refused"}]}`, nil)
	l.publish(t, broker.NodeIn(l.s.ID(), "poll"), "go")
	ev := l.waitEvent(t, "stall", func(ev *pb.Event) bool { return ev.Kind == "stall.detected" })
	require.Contains(t, ev.Message, "the same result 3 times")
}

func TestTwoNodesContendForOneLock(t *testing.T) {
	r := newRun(t)
	g := r.load(`digraph s { kind="session"; a [type="custom.echo", locks="src/"]; b [type="custom.echo", locks="src/main.go"] }`)
	cfg := r.config(g)
	release := make(chan struct{})
	started := make(chan string, 4)
	var running atomic.Int32
	var overlap atomic.Bool
	reg := nodes.NewRegistry()
	require.NoError(t, nodes.RegisterBuiltins(reg, nodes.Deps{Providers: func(string) (agent.Provider, error) { return agent.NewMock(nil), nil }}))
	require.NoError(t, reg.Register(nodes.Info{Type: "custom.echo", Handler: nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
		if running.Add(1) > 1 {
			overlap.Store(true)
		}
		started <- in.Node.ID
		<-release
		running.Add(-1)
		return &nodes.Outcome{Status: nodes.StatusSuccess}, nil
	})}))
	cfg.Registry = reg
	events := make(chan *pb.Event, 1000)
	cfg.Observer = func(ev *pb.Event) { r.observe(ev); events <- ev }
	s, err := session.Start(context.Background(), cfg)
	require.NoError(t, err)
	defer s.Stop()
	l := &live{run: r, s: s, events: events}
	l.publish(t, broker.NodeIn(s.ID(), "a"), "x")
	require.Equal(t, "a", <-started)
	l.publish(t, broker.NodeIn(s.ID(), "b"), "y")
	ev := l.waitEvent(t, "lock.waiting", func(ev *pb.Event) bool { return ev.Kind == "lock.waiting" && ev.Node == "b" })
	require.Contains(t, ev.Message, "a holds src/")
	require.Contains(t, s.System().Explain("b").Explain, "lock held")
	release <- struct{}{}
	select {
	case n := <-started:
		require.Equal(t, "b", n, "b runs once a released the lock")
	case <-time.After(20 * time.Second):
		t.Fatal("b never ran")
	}
	release <- struct{}{}
	require.False(t, overlap.Load(), "the two never ran at once")
}

// TestBudgetCrossedDuringRunCancelsHandler: usage reported while the
// handler runs crosses the node's budget, and the handler's context is
// cancelled with the reason.
func TestBudgetCrossedDuringRunCancelsHandler(t *testing.T) {
	r := newRun(t)
	g := r.load(`digraph s { start [shape=Mdiamond]; spend [type="custom.echo", budget_tokens=100]; exit [shape=Msquare]; start -> spend -> exit }`)
	cfg := r.config(g)
	require.NoError(t, cfg.Registry.Replace(nodes.Info{Type: "custom.echo", Handler: nodes.HandlerFunc(
		func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
			in.OnUsage(nodes.Usage{OutputTokens: 150})
			select {
			case <-ctx.Done():
				return &nodes.Outcome{Status: nodes.StatusFail, Usage: nodes.Usage{OutputTokens: 150}}, ctx.Err()
			case <-time.After(20 * time.Second):
				return &nodes.Outcome{Status: nodes.StatusSuccess}, nil
			}
		})}))
	rep := r.runConfig(cfg)
	require.Equal(t, "fail", rep.Status)
	require.Contains(t, rep.Reason, "a budget was spent during the run")
	require.NotNil(t, r.event("budget.exceeded", "spend"))
}

func TestJoinTimeoutSaysWhatIsMissing(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	l := serve(t, `digraph s { kind="session"
		a [prompt="a"]; b [prompt="b"]; j [prompt="join", trigger=all, join_timeout=30s]
		a -> j; b -> j }`, "", clk)
	l.publish(t, broker.NodeIn(l.s.ID(), "a"), "go")
	l.waitEvent(t, "j waiting", func(ev *pb.Event) bool { return ev.Kind == "gate.waiting" && ev.Node == "j" })
	clk.Advance(30 * time.Second)
	ev := l.waitEvent(t, "j completed", completedBy("j"))
	require.Equal(t, "success", ev.Status)
	require.Equal(t, 1, l.calls_("j"), "fired with what it had")
	l.waitEvent(t, "checkpoint", func(ev *pb.Event) bool { return ev.Kind == "checkpoint.saved" && ev.Node == "j" })
	require.Contains(t, l.file("checkpoint.json"), `"join.missing": "b.j"`, "the outcome says which inputs were missing")
}

// TestConversationOverBidirectionalEdge: two agents talk over one
// dir=both edge until max_iterations stops them.
func TestConversationOverBidirectionalEdge(t *testing.T) {
	l := serve(t, `digraph s { kind="session"
		alice [prompt="reply to bob", max_iterations=3]
		bob [prompt="reply to alice", max_iterations=3]
		alice -> bob [dir=both] }`, "", nil)
	l.publish(t, broker.NodeIn(l.s.ID(), "alice"), "hi bob")
	l.waitEvent(t, "iterations.exceeded", func(ev *pb.Event) bool { return ev.Kind == "iterations.exceeded" })
	require.Equal(t, 3, l.calls_("alice"))
	require.Equal(t, 3, l.calls_("bob"))
	got := l.inputsOf("alice")
	require.Equal(t, "handoff:hi bob", got[0])
	require.Contains(t, got[1], "[mock] bob", "alice hears bob's replies on the reverse direction")
}

// TestRetryWaitsForRetryAfter: a retryable failure that carries the
// server's Retry-After (30s, longer than the node's backoff) is retried
// only once that much time has passed on the session's clock.
func TestRetryWaitsForRetryAfter(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	l := serve(t, `digraph s { kind="session"; fetch [prompt="fetch", trigger=manual, max_retries=1] }`,
		`{"fetch":[{"error":"rate_limit","retry_after":"30s"},{"status":"success","response":"fetched"}]}`, clk)
	armed := clk.Pending()
	require.NoError(t, l.s.System().Trigger("fetch", nil))
	ev := l.waitEvent(t, "fetch retrying", func(ev *pb.Event) bool { return ev.Kind == "node.retrying" && ev.Node == "fetch" })
	var delay string
	for _, kv := range ev.Attrs {
		if kv.Key == "delay_ms" {
			delay = kv.Value
		}
	}
	require.Equal(t, "30000", delay, "the retry waits for the server's Retry-After")
	deadline := time.After(20 * time.Second)
	for {
		changed := clk.Changed()
		if clk.Pending() > armed {
			break
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatal("the retry armed no timer")
		}
	}
	clk.Advance(29 * time.Second)
	require.Equal(t, 1, l.calls_("fetch"), "no retry before 30s")
	clk.Advance(time.Second)
	l.waitEvent(t, "fetch completed", completedBy("fetch"))
	require.Equal(t, 2, l.calls_("fetch"))
}

// A join says it waits once per waiting period: when it starts waiting,
// and again only when what it waits for changes — not at every arrival on
// an edge that already delivered (a busy edge made the event feed a
// gate.waiting per envelope). After it fires, the next period says so
// again.
func TestJoinSaysItWaitsOncePerWait(t *testing.T) {
	l := serve(t, `digraph s { kind="session"
		j [prompt="join", trigger=all]
		a -> j; b -> j; c -> j
		a [prompt="a"]; b [prompt="b"]; c [prompt="c"] }`, "", nil)
	id := l.s.ID()
	buffered := func(edge string, want int) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			for _, b := range l.s.System().Buffers(context.Background()) {
				if b.Node == "j" && b.Edge == edge && b.Ready == want {
					return
				}
			}
			require.True(t, time.Now().Before(deadline), "%s never held %d", edge, want)
			time.Sleep(5 * time.Millisecond) // polling the node's buffers
		}
	}
	for i := 0; i < 4; i++ {
		l.publish(t, broker.Edge(id, "a.j"), fmt.Sprint("a", i))
	}
	buffered("a.j", 3) // the gate took the first, the others wait
	l.publish(t, broker.Edge(id, "b.j"), "b")
	l.publish(t, broker.Edge(id, "b.j"), "b again")
	buffered("b.j", 1)
	l.publish(t, broker.Edge(id, "c.j"), "c")
	l.waitEvent(t, "j completed", completedBy("j"))
	// The next round: a's and b's second envelopes wait for c.
	for _, what := range []string{"the first round's", "the second round's"} {
		l.waitEvent(t, what+" wait for c", func(ev *pb.Event) bool {
			return ev.Kind == "gate.waiting" && ev.Node == "j" && strings.HasSuffix(ev.Message, "missing c.j")
		})
	}
	var waits []string
	l.run.mu.Lock()
	for _, ev := range l.run.events {
		if ev.Node == "j" && ev.Kind == "gate.waiting" {
			waits = append(waits, ev.Message)
		}
	}
	l.run.mu.Unlock()
	require.Len(t, waits, 4, "%q", waits)
	for i, want := range []string{"missing b.j, c.j", "missing c.j", "missing b.j, c.j", "missing c.j"} {
		require.True(t, strings.HasSuffix(waits[i], want), "%q", waits)
	}
}

// TestSameEventsAreNotAStall: a reactive session receives the same alert
// five times from outside; the node it reaches and the node after it give
// the same reply each time. Five events are five pieces of work, not a
// node going round in circles: neither node is stopped as stalled, and
// every event is handled by both (each is its own root, and what it causes
// downstream carries it).
func TestSameEventsAreNotAStall(t *testing.T) {
	l := serve(t, `digraph s { kind="session"; triage [prompt="triage"]; file [prompt="file it"]; triage -> file }`,
		`{"triage":[{"response":"ack"}],"file":[{"response":"filed"}]}`, nil)
	for i := 0; i < 5; i++ {
		l.publish(t, broker.NodeIn(l.s.ID(), "triage"), "disk full on db-1")
		l.waitEvent(t, "file completed", completedBy("file"))
	}
	require.Equal(t, 5, l.calls_("triage"))
	require.Equal(t, 5, l.calls_("file"))
	require.Nil(t, l.event("stall.detected", "triage"))
	require.Nil(t, l.event("stall.detected", "file"))
	require.Nil(t, l.event("node.refused", "file"))
}

// TestLoopInSessionStalls: inside a session, a loop fed by one event that
// comes back with the same input and the same reply is still a stall — its
// envelopes keep the event as their root.
func TestLoopInSessionStalls(t *testing.T) {
	l := serve(t, `digraph s { kind="session"; a [prompt="a"]; b [prompt="b"]; a -> b; b -> a }`,
		`{"a":[{"response":"tried again"}],"b":[{"response":"still broken"}]}`, nil)
	l.publish(t, broker.NodeIn(l.s.ID(), "a"), "fix the build")
	ev := l.waitEvent(t, "stall", func(ev *pb.Event) bool { return ev.Kind == "stall.detected" })
	require.Contains(t, ev.GetMessage(), "the same input and the same result 3 times in a row")
}
