package switchyard_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/switchyard/switchyard"
	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/middleware"
	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/session"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// echo replies with prefix + its input and records what it saw.
type echo struct {
	prefix string
	mu     sync.Mutex
	seen   []switchyard.Message
	states []switchyard.State
}

func (a *echo) Run(ctx context.Context, in switchyard.Message) (switchyard.Message, error) {
	a.mu.Lock()
	a.seen = append(a.seen, in)
	a.states = append(a.states, switchyard.StateFrom(ctx))
	a.mu.Unlock()
	return switchyard.Message{Text: a.prefix + in.Text}, nil
}

func TestStateOutputsPreviousAndInputKey(t *testing.T) {
	a, b, c := &echo{prefix: "a:"}, &echo{prefix: "b:"}, &echo{prefix: "c:"}
	g := switchyard.New("state").
		Agent("a", a).
		Node("shell", map[string]string{"shape": "parallelogram", "tool_command": "printf tool-out"}).
		Agent("b", b).
		Agent("c", c, switchyard.InputKey("a")).
		Node("review", map[string]string{"prompt": "Review $goal"}). // an agent CLI node (the mock provider here)
		Chain("a", "shell", "b", "c", "review")
	rep, err := switchyard.Run(testCtx(t), g, switchyard.Message{Text: "in"}, switchyard.WithWorkDir(t.TempDir()))
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status, rep.Reason)

	require.Equal(t, "in", a.seen[0].Text, "the first node reads the session input")
	require.Equal(t, "tool-out", b.seen[0].Text, "a DOT-style tool node's output is _previous too")
	require.Equal(t, "a:in", c.seen[0].Text, "InputKey reads another node's output")
	st := c.states[0]
	require.Equal(t, "a:in", st.Output("a"))
	require.Equal(t, "tool-out", st.Output("shell"))
	require.Equal(t, "b:tool-out", st.Previous())
	require.Equal(t, "in", st.Input())
	require.Equal(t, "success", st.Get("outcome"))
	// The messages of a state kept past its run are its own copy.
	require.Len(t, st.Messages(), 1)
	require.Equal(t, "b", st.Messages()[0].From)
	require.NotEmpty(t, rep.Node("review").Output, "an agent CLI node's response is its output")
	require.Equal(t, rep.Node("review").Output, rep.Result.Text)
	require.Equal(t, "c:a:in", rep.Node("c").Output)
}

func TestMetadataPrecedenceAtAJoin(t *testing.T) {
	tag := func(kv map[string]string) switchyard.Agent {
		return switchyard.AgentFunc(func(_ context.Context, in switchyard.Message) (switchyard.Message, error) {
			return switchyard.Message{Text: "x", Metadata: kv}, nil
		})
	}
	var joined map[string]string
	join := switchyard.AgentFunc(func(_ context.Context, in switchyard.Message) (switchyard.Message, error) {
		joined = in.Metadata
		return switchyard.Message{Text: "joined", Metadata: map[string]string{"stage": "join"}}, nil
	})
	rep, err := switchyard.Run(testCtx(t), switchyard.New("meta").
		Agent("first", tag(map[string]string{"stage": "first", "first": "1", "plan": "team"})).
		Node("fork", map[string]string{"shape": "component"}).
		Agent("left", tag(map[string]string{"left": "1"})).
		Agent("right", tag(map[string]string{"right": "1"})).
		Node("fanin", map[string]string{"shape": "tripleoctagon"}).
		Agent("join", join).
		Chain("first", "fork").Edge("fork", "left").Edge("fork", "right").
		Edge("left", "fanin").Edge("right", "fanin").Chain("fanin", "join"),
		switchyard.Message{Text: "go", Metadata: map[string]string{"plan": "free", "user": "ann"}})
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status, rep.Reason)
	// The input's keys, overridden by later nodes (plan), and both branches' keys.
	require.Equal(t, map[string]string{"plan": "team", "user": "ann", "stage": "first", "first": "1", "left": "1", "right": "1"}, joined)
	require.Equal(t, "join", rep.Result.Metadata["stage"], "the last node's keys win")
}

// TestCallerReachesNodesAndEvents: the caller on Run's context reaches
// every node (nodes.CallerFrom) and the events; on the bus, its headers are
// session's TestCallerHeadersOnTheWire.
func TestCallerReachesNodesAndEvents(t *testing.T) {
	b := brokertest.Start(t)
	var seen nodes.Caller
	g := switchyard.New("caller").Agent("work", switchyard.AgentFunc(func(ctx context.Context, in switchyard.Message) (switchyard.Message, error) {
		seen, _ = nodes.CallerFrom(ctx)
		return switchyard.Message{Text: "done"}, nil
	}))
	var events []switchyard.Event
	ctx := nodes.WithCaller(testCtx(t), nodes.Caller{Tenant: "acme", User: "ann", Trace: "tr-9", Values: map[string]string{"region": "eu"}})
	rep, err := switchyard.Run(ctx, g, switchyard.Message{Text: "x"}, switchyard.WithBroker(b), switchyard.WithSessionID("caller-1"),
		switchyard.WithHooks(switchyard.Hooks{OnNode: func(ev switchyard.Event) { events = append(events, ev) }}))
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status)
	require.Equal(t, "acme", seen.Tenant)
	require.Equal(t, "ann", seen.User)
	require.Equal(t, "tr-9", seen.Trace)
	require.Equal(t, "eu", seen.Values["region"])
	var work *switchyard.Event
	for i := range events {
		if events[i].Node == "work" {
			work = &events[i]
		}
	}
	require.NotNil(t, work)
	require.Equal(t, "acme", work.Attrs["tenant"])
}

func TestErrorPolicies(t *testing.T) {
	failing := func(calls *atomic.Int32, okFrom int32) switchyard.Agent {
		return switchyard.AgentFunc(func(_ context.Context, in switchyard.Message) (switchyard.Message, error) {
			if n := calls.Add(1); okFrom == 0 || n < okFrom {
				return switchyard.Message{}, errors.New("service down")
			}
			return switchyard.Message{Text: "recovered"}, nil
		})
	}
	cases := []struct {
		name     string
		policy   switchyard.ErrorPolicy
		okFrom   int32
		session  string
		status   switchyard.NodeStatus
		attempts int
		result   string
	}{
		{"propagate", switchyard.Propagate, 0, "fail", switchyard.NodeFailed, 1, ""},
		{"skip", switchyard.Skip, 0, "success", switchyard.NodeSkipped, 1, "after:before"},
		{"continue", switchyard.Continue, 0, "success", switchyard.NodePartial, 1, "after:before"},
		{"retry then succeed", switchyard.Retry(3), 3, "success", switchyard.NodeSuccess, 3, "after:recovered"},
		{"retry then skip", switchyard.Retry(2, switchyard.Skip), 0, "success", switchyard.NodeSkipped, 3, "after:before"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			var errs []string
			g := switchyard.New("policy").
				Agent("before", switchyard.AgentFunc(func(context.Context, switchyard.Message) (switchyard.Message, error) {
					return switchyard.Message{Text: "before"}, nil
				})).
				Agent("flaky", failing(&calls, tc.okFrom), switchyard.OnError(tc.policy)).
				Agent("after", &echo{prefix: "after:"}).
				Chain("before", "flaky", "after")
			rep, err := switchyard.Run(testCtx(t), g, switchyard.Message{Text: "x"}, switchyard.WithBackoff(func(int) time.Duration { return 0 }),
				switchyard.WithHooks(switchyard.Hooks{OnError: func(ev switchyard.Event) { errs = append(errs, ev.Kind+":"+ev.Node) }}))
			if tc.session == "fail" {
				var re *switchyard.RunError
				require.ErrorAs(t, err, &re, "a failed run returns a RunError")
				require.Equal(t, "flaky", re.Node())
				require.ErrorIs(t, err, switchyard.ErrNodeFailed)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tc.session, rep.Status, rep.Reason)
			n := rep.Node("flaky")
			require.Equal(t, tc.status, n.Status)
			require.Equal(t, tc.attempts, n.Attempts)
			require.Equal(t, int32(tc.attempts), calls.Load())
			require.Equal(t, tc.result, rep.Node("after").Output)
			if tc.status != switchyard.NodeSuccess {
				require.Contains(t, n.Error, "service down")
			} else {
				require.Empty(t, n.Error)
			}
			if tc.session == "fail" {
				require.Equal(t, switchyard.NodeSkipped, rep.Node("after").Status, "a node that never ran is reported skipped")
				require.Equal(t, []string{"node.completed:flaky", "session.completed:"}, errs)
			} else {
				require.Empty(t, errs)
			}
		})
	}
}

func TestSessionMiddlewareAndHooks(t *testing.T) {
	m := middleware.NewMetrics()
	var started, finished atomic.Int32
	var nodesSeen []string
	var final *switchyard.Report
	g := switchyard.New("mw").Agent("a", &echo{prefix: "a"}).Agent("b", &echo{prefix: "b"}).Chain("a", "b")
	rep, err := switchyard.Run(testCtx(t), g, switchyard.Message{Text: "!"},
		switchyard.WithMiddleware(m.Middleware(), middleware.Recover()),
		switchyard.WithHooks(switchyard.Hooks{
			OnStart:  func(switchyard.Event) { started.Add(1) },
			OnNode:   func(ev switchyard.Event) { nodesSeen = append(nodesSeen, ev.Node+"="+ev.Status) },
			OnFinish: func(r *switchyard.Report) { finished.Add(1); final = r },
		}))
	require.NoError(t, err)
	require.Equal(t, "ba!", rep.Result.Text)
	require.Equal(t, int32(1), started.Load())
	require.Equal(t, int32(1), finished.Load())
	require.Same(t, rep, final)
	require.Equal(t, []string{"start=success", "a=success", "b=success", "exit=success"}, nodesSeen)
	for _, id := range []string{"start", "a", "b", "exit"} {
		require.Equal(t, int64(1), m.Node(id).Runs, id)
	}
}

func TestStreamDeliversEveryEventThenCloses(t *testing.T) {
	g := switchyard.New("stream").Agent("a", &echo{}).Agent("b", &echo{}).Chain("a", "b")
	ex, err := switchyard.Stream(testCtx(t), g, switchyard.Message{Text: "x"})
	require.NoError(t, err)
	defer ex.Close()
	var kinds []string
	var last uint64
	for ev := range ex.Events() {
		require.Greater(t, ev.Seq, last, "events arrive in order")
		last = ev.Seq
		if ev.Kind == "node.completed" || strings.HasPrefix(ev.Kind, "session.") {
			kinds = append(kinds, ev.Kind+" "+ev.Node)
		}
		if ev.Kind == "session.completed" {
			require.Equal(t, "success", ev.Status)
		}
	}
	require.Equal(t, []string{"session.started ", "node.completed start", "node.completed a", "node.completed b",
		"node.completed exit", "session.completed "}, kinds)
	rep, err := ex.Wait(testCtx(t))
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status)
}

func TestAnswerFromGoAndCancel(t *testing.T) {
	gate := func() *switchyard.Graph {
		return switchyard.New("gate").
			Node("ask", map[string]string{"shape": "hexagon", "label": "Go?"}).
			Agent("yes", &echo{prefix: "yes"}).Agent("no", &echo{prefix: "no"}).
			Edge("ask", "yes", switchyard.Label("[Y] Yes")).Edge("ask", "no", switchyard.Label("[N] No"))
	}
	ex, err := switchyard.Stream(testCtx(t), gate(), switchyard.Message{Text: "?"})
	require.NoError(t, err)
	defer ex.Close()
	for ev := range ex.Events() {
		if ev.Kind == "human.question" {
			require.NoError(t, ex.Answer("ask", "N"))
		}
	}
	rep, err := ex.Wait(testCtx(t))
	require.NoError(t, err)
	require.Equal(t, "no[N] No", rep.Result.Text, "a gate's output is the choice")

	// A run whose context ends while it waits is stopped, resumable.
	ctx, cancel := context.WithCancel(testCtx(t))
	rep, err = switchyard.Run(ctx, gate(), switchyard.Message{}, switchyard.WithHooks(switchyard.Hooks{
		OnNode: func(ev switchyard.Event) {
			if ev.Node == "start" {
				cancel()
			}
		}}))
	require.ErrorIs(t, err, context.Canceled, "%+v", rep)
	require.Equal(t, "running", rep.Status)
}

// cancelAtUse is a context that cancels itself at its n-th use (a call of
// Done or Err): sweeping n over every use a run makes ends the context at
// every point of Run in turn, the waits for acknowledgements included,
// without depending on timing.
type cancelAtUse struct {
	context.Context
	cancel context.CancelFunc
	left   atomic.Int64
	uses   atomic.Int64
}

func newCancelAtUse(parent context.Context, n int64) *cancelAtUse {
	ctx, cancel := context.WithCancel(parent)
	c := &cancelAtUse{Context: ctx, cancel: cancel}
	c.left.Store(n)
	return c
}

func (c *cancelAtUse) use() {
	c.uses.Add(1)
	if c.left.Add(-1) == 0 {
		c.cancel()
	}
}

func (c *cancelAtUse) Done() <-chan struct{} { c.use(); return c.Context.Done() }
func (c *cancelAtUse) Err() error            { c.use(); return c.Context.Err() }

// TestRunReportsWhenContextEndsWhileStarting: whenever ctx ends, Run
// returns a report — the session stopped where it was (resumable, and
// Resume finishes it) or not started at all — never a nil one.
func TestRunReportsWhenContextEndsWhileStarting(t *testing.T) {
	b := brokertest.Start(t)
	// hold, when not nil, keeps b from answering until it is closed, and
	// then until its session stops it: the run cancelled when Wait looks
	// at ctx finds its session running, and stops it there.
	g := func(hold <-chan struct{}) *switchyard.Graph {
		echoB := &echo{prefix: "b"}
		return switchyard.New("c").Agent("a", &echo{prefix: "a"}).Agent("b", switchyard.AgentFunc(func(ctx context.Context, in switchyard.Message) (switchyard.Message, error) {
			if hold != nil {
				<-hold
				<-ctx.Done()
				return switchyard.Message{}, ctx.Err()
			}
			return echoB.Run(ctx, in)
		})).Chain("a", "b")
	}
	whole := newCancelAtUse(testCtx(t), -1)
	rep, err := switchyard.Run(whole, g(nil), switchyard.Message{Text: "x"}, switchyard.WithBroker(b))
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status)
	uses := whole.uses.Load()
	require.Positive(t, uses)
	t.Logf("a whole run uses its context %d times", uses)
	stopped := 0
	for n := int64(1); n <= uses; n++ {
		ctx := newCancelAtUse(testCtx(t), n)
		var hold <-chan struct{}
		if n == uses-1 {
			// Wait looks at ctx twice, its select and then Err: a started
			// run's input is handed to its first node in process, and
			// nothing else uses ctx once the session is recorded.
			hold = ctx.Context.Done()
		}
		rep, err := switchyard.Run(ctx, g(hold), switchyard.Message{Text: "x"}, switchyard.WithBroker(b))
		require.NotNil(t, rep, "cancelled at use %d of %d: %v", n, uses, err)
		require.NotEmpty(t, rep.SessionID, "use %d", n)
		if err == nil {
			require.Equal(t, "success", rep.Status, "use %d", n)
			continue
		}
		require.ErrorIs(t, err, context.Canceled, "use %d", n)
		switch rep.Status {
		case "running":
			stopped++
			rep, err := switchyard.Resume(testCtx(t), g(nil), rep.SessionID, switchyard.WithBroker(b))
			require.NoError(t, err, "use %d", n)
			require.Equal(t, "success", rep.Status, "resumed after use %d: %s", n, rep.Reason)
			require.Equal(t, "bax", rep.Result.Text)
		case "fail":
			// Not started: the store holds nothing of it.
			require.Contains(t, rep.Reason, "context canceled", "use %d", n)
			_, err := b.JetStream().KeyValue(testCtx(t), broker.KVName(rep.SessionID))
			require.ErrorIs(t, err, jetstream.ErrBucketNotFound, "use %d", n)
			shared, err := broker.SharedSessions(testCtx(t), b.JetStream())
			require.NoError(t, err)
			require.NotContains(t, shared, rep.SessionID, "use %d: nor the shared bucket", n)
			_, err = b.JetStream().Stream(testCtx(t), broker.StreamName(rep.SessionID))
			require.ErrorIs(t, err, jetstream.ErrStreamNotFound, "use %d", n)
			_, err = switchyard.Resume(testCtx(t), g(nil), rep.SessionID, switchyard.WithBroker(b))
			require.ErrorIs(t, err, session.ErrNoCheckpoint, "use %d", n)
		default:
			t.Fatalf("use %d: status %q", n, rep.Status)
		}
	}
	require.Positive(t, stopped, "some cancellation stops a started session")
}

func TestCheckpointsRemovedOnSuccessUnlessRetained(t *testing.T) {
	for _, retain := range []bool{false, true} {
		b := brokertest.Start(t)
		g := switchyard.New("cp").Agent("a", &echo{}).Agent("b", &echo{}).Agent("c", &echo{}).Chain("a", "b", "c")
		var saves atomic.Int32
		rep, err := switchyard.Run(testCtx(t), g, switchyard.Message{Text: "x"}, switchyard.WithBroker(b),
			switchyard.WithCheckpoint(switchyard.CheckpointPolicy{EveryNodes: 2, Retain: retain}),
			switchyard.WithHooks(switchyard.Hooks{OnNode: func(switchyard.Event) {}, OnStart: func(switchyard.Event) {}}),
			switchyard.WithMiddleware(func(next nodes.Handler) nodes.Handler { return next }))
		require.NoError(t, err)
		require.Equal(t, "success", rep.Status)
		stored, err := session.List(testCtx(t), b)
		require.NoError(t, err)
		if retain {
			require.Len(t, stored, 1)
			require.Equal(t, rep.SessionID, stored[0].ID)
			require.Equal(t, "success", stored[0].Status)
			h, err := session.History(testCtx(t), b, rep.SessionID)
			require.NoError(t, err)
			saves.Store(int32(len(h)))
			require.Positive(t, saves.Load())
		} else {
			require.Empty(t, stored, "a successful session's store is removed")
		}
	}
}

func TestBuildErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		g    *switchyard.Graph
		want string
	}{
		"reserved id":   {switchyard.New("g").Agent("_previous", &echo{}), "reserved state key"},
		"duplicate":     {switchyard.New("g").Agent("a", &echo{}).Agent("a", &echo{}), "added twice"},
		"bad edge":      {switchyard.New("g").Agent("a", &echo{}).Edge("a", "nowhere"), "nowhere"},
		"dot syntax":    {switchyard.ParseDOT("bad.dot", []byte("digraph g {\n  a -> \n}")), "bad.dot:3:1"},
		"Use on DOT":    {switchyard.New("g").Node("h", map[string]string{"shape": "hexagon"}, switchyard.Use(middleware.Recover())), "Use applies to Go nodes"},
		"nodes on DOT":  {switchyard.ParseDOT("t.dot", []byte(`digraph g {}`)).Agent("a", &echo{}), "from the DOT source"},
		"invalid bind":  {switchyard.New("g").BindHandler("not a type", nil), "invalid handler type"},
		"bad condition": {switchyard.New("g").Agent("a", &echo{}).Agent("b", &echo{}).Edge("a", "b", switchyard.When("x==")), "condition"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := tc.g.Build()
			require.ErrorContains(t, err, tc.want)
			_, err = switchyard.Run(testCtx(t), tc.g, switchyard.Message{})
			require.ErrorContains(t, err, tc.want, "Run refuses it before starting anything")
		})
	}
}

// Build keeps its result while the Graph is unchanged (every Run builds
// it), and builds again once a node, an edge, a bound type or the DOT
// source changed it.
func TestBuildKept(t *testing.T) {
	g := switchyard.New("g").Agent("a", &echo{})
	first, err := g.Build()
	require.NoError(t, err)
	again, err := g.Build()
	require.NoError(t, err)
	require.Same(t, first, again, "unchanged: the same graph")

	g.Agent("b", &echo{})
	grown, err := g.Build()
	require.NoError(t, err)
	require.NotSame(t, first, grown)
	require.NotNil(t, grown.Node("b"))
	require.Nil(t, first.Node("b"), "a kept graph is never changed")

	g.Edge("a", "b")
	edged, err := g.Build()
	require.NoError(t, err)
	require.NotSame(t, grown, edged)
	require.NotEmpty(t, edged.Outgoing("a"))

	src := []byte(`digraph g { s [shape=Mdiamond]; x [shape=box]; e [shape=Msquare]; s -> x -> e }`)
	d := switchyard.ParseDOT("g.dot", src)
	one, err := d.Build()
	require.NoError(t, err)
	copy(src[bytes.Index(src, []byte("x [")):], "y")
	copy(src[bytes.Index(src, []byte("-> x")):], "-> y")
	two, err := d.Build()
	require.NoError(t, err)
	require.NotSame(t, one, two, "the source changed under the Graph")
	require.NotNil(t, two.Node("y"))
}

// TestStreamIsSubscribedWhenItReturns: once Stream returns, the session's
// subjects are at the server — an answer published at once on another
// connection reaches its human gate (kept for the question to come). Run
// skips that round trip (nothing outside can reach the session before it
// returns); a stream must not.
func TestStreamIsSubscribedWhenItReturns(t *testing.T) {
	b := brokertest.Start(t)
	nc, err := b.NewConn()
	require.NoError(t, err)
	defer nc.Close()
	g := switchyard.New("gate").
		Node("approve", map[string]string{"shape": "hexagon", "label": "Ship?"}).
		Agent("ship", switchyard.AgentFunc(func(context.Context, switchyard.Message) (switchyard.Message, error) {
			return switchyard.Message{Text: "shipped"}, nil
		})).
		Edge("approve", "ship", switchyard.Label("[Y] Yes"))
	for i := 0; i < 20; i++ {
		id := "subscribed-" + string(rune('a'+i))
		ex, err := switchyard.Stream(testCtx(t), g, switchyard.Message{}, switchyard.WithBroker(b), switchyard.WithSessionID(id),
			switchyard.WithoutCheckpoints())
		require.NoError(t, err)
		require.NoError(t, nc.Publish(broker.Control(id, "answer"), []byte(`{"node":"approve","choice":"Y"}`)))
		require.NoError(t, nc.Flush())
		ctx, cancel := context.WithTimeout(testCtx(t), 10*time.Second)
		rep, err := ex.Wait(ctx)
		cancel()
		ex.Close()
		require.NoError(t, err, "run %d: the answer sent when Stream returned was lost", i)
		require.Equal(t, "success", string(rep.Status))
	}
}
