package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/nodes"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// The rows of the spec's parity matrix (section 11.12) that execute, on the
// real runtime.

func TestLinearPipeline(t *testing.T) {
	r := newRun(t)
	rep := r.exec(`digraph linear {
		graph [goal="Ship it"]
		start [shape=Mdiamond]
		a [prompt="Do A for $goal"]
		b [prompt="Do B"]
		c [prompt="Do C"]
		exit [shape=Msquare]
		start -> a -> b -> c -> exit
	}`)
	require.Equal(t, "success", rep.Status, rep.Reason)
	require.Equal(t, []string{"start", "a", "b", "c", "exit"}, r.visits())
	// $goal expansion reached the agent, and the stage files exist.
	require.Contains(t, r.file("a", "prompt.md"), "Do A for Ship it")
	require.NotEmpty(t, r.file("a", "response.md"))
	var st map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.file("c", "status.json")), &st))
	require.Equal(t, "success", st["outcome"])
	cp := r.file("checkpoint.json")
	require.Contains(t, cp, `"status": "success"`)
	for _, k := range []string{"session.started", "node.started", "node.completed", "edge.selected", "checkpoint.saved", "session.completed"} {
		require.NotZero(t, r.kinds()[k], "no %s event", k)
	}
}

func TestConditionalBranches(t *testing.T) {
	for _, tc := range []struct {
		status string
		want   []string
	}{
		{"success", []string{"start", "work", "gate", "ship", "exit"}},
		{"fail", []string{"start", "work", "gate", "rework", "exit"}},
	} {
		t.Run(tc.status, func(t *testing.T) {
			r := newRun(t)
			r.mock = fmt.Sprintf(`{"work":[{"status":%q}]}`, tc.status)
			rep := r.exec(`digraph cond {
				start [shape=Mdiamond]
				work [prompt="work"]
				gate [shape=diamond]
				ship [prompt="ship"]
				rework [prompt="rework"]
				exit [shape=Msquare]
				start -> work -> gate
				gate -> ship [condition="outcome=success"]
				gate -> rework [condition="outcome!=success"]
				ship -> exit
				rework -> exit
			}`)
			require.Equal(t, "success", rep.Status, rep.Reason)
			require.Equal(t, tc.want, r.visits())
			// The diamond passes the upstream outcome through (decision 1).
			require.Equal(t, tc.status, r.event("node.completed", "gate").Status)
		})
	}
}

func TestRetriesThenSucceeds(t *testing.T) {
	r := newRun(t)
	r.mock = `{"flaky":[{"status":"retry"},{"status":"retry"},{"status":"success","response":"ok"}]}`
	rep := r.exec(`digraph retry {
		start [shape=Mdiamond]
		flaky [prompt="x", max_retries=2]
		exit [shape=Msquare]
		start -> flaky -> exit
	}`)
	require.Equal(t, "success", rep.Status, rep.Reason)
	require.Equal(t, 3, rep.Node("flaky").Attempts)
	require.Equal(t, 2, r.kinds()["node.retrying"])
	require.EqualValues(t, 3, r.event("node.completed", "flaky").Attempts)
}

func TestRetriesExhausted(t *testing.T) {
	for _, tc := range []struct {
		name, attrs, want, run string
	}{
		{"fail", "max_retries=1", "fail", "fail"},
		{"allow_partial", "max_retries=1, allow_partial=true", "partial_success", "success"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRun(t)
			r.mock = `{"flaky":[{"status":"retry"}]}`
			rep := r.exec(`digraph retry {
				start [shape=Mdiamond]
				flaky [prompt="x", ` + tc.attrs + `]
				exit [shape=Msquare]
				start -> flaky -> exit
			}`)
			require.Equal(t, tc.run, rep.Status, rep.Reason)
			require.Equal(t, tc.want, rep.Node("flaky").Status)
			require.Equal(t, 2, rep.Node("flaky").Attempts)
		})
	}
}

// A plain FAIL is not retried unless retry_on_fail (decision 2).
func TestFailRetriedOnlyWithRetryOnFail(t *testing.T) {
	for _, tc := range []struct {
		attrs    string
		attempts int
	}{{"max_retries=2", 1}, {"max_retries=2, retry_on_fail=true", 3}} {
		t.Run(tc.attrs, func(t *testing.T) {
			r := newRun(t)
			r.mock = `{"w":[{"status":"fail"}]}`
			rep := r.exec(`digraph f { start [shape=Mdiamond]; w [prompt="x", ` + tc.attrs + `]; exit [shape=Msquare]; start -> w -> exit }`)
			require.Equal(t, "fail", rep.Status)
			require.Equal(t, tc.attempts, rep.Node("w").Attempts)
		})
	}
}

func TestGoalGate(t *testing.T) {
	src := `digraph gate {
		start [shape=Mdiamond]
		impl [prompt="implement", goal_gate=true, retry_target=impl]
		check [shape=diamond]
		exit [shape=Msquare]
		start -> impl
		impl -> check [condition="outcome=fail"]
		impl -> check [condition="outcome!=fail"]
		check -> exit
	}`
	t.Run("blocks then allows", func(t *testing.T) {
		r := newRun(t)
		r.mock = `{"impl":[{"status":"partial_success"},{"status":"fail"},{"status":"success"}]}`
		// partial_success satisfies a goal gate (spec fb57a55): one visit.
		rep := r.exec(src)
		require.Equal(t, "success", rep.Status, rep.Reason)
		require.Equal(t, 1, rep.Node("impl").Visits)
	})
	t.Run("unsatisfied jumps to retry_target", func(t *testing.T) {
		r := newRun(t)
		r.mock = `{"impl":[{"status":"fail"},{"status":"success"}]}`
		rep := r.exec(src)
		require.Equal(t, "success", rep.Status, rep.Reason)
		require.Equal(t, 2, rep.Node("impl").Visits)
		require.NotNil(t, r.event("goal_gate.unsatisfied", "impl"))
	})
	t.Run("no retry target fails the run", func(t *testing.T) {
		r := newRun(t)
		r.mock = `{"impl":[{"status":"fail"}]}`
		rep := r.exec(strings.Replace(src, ", retry_target=impl", "", 1))
		require.Equal(t, "fail", rep.Status)
		require.Contains(t, rep.Reason, "goal gate impl")
	})
}

func TestHumanGateRoutes(t *testing.T) {
	src := `digraph human {
		start [shape=Mdiamond]
		review [shape=hexagon, label="Ship it?"]
		ship [prompt="ship"]
		revise [prompt="revise"]
		exit [shape=Msquare]
		start -> review
		review -> ship [label="[A] Approve"]
		review -> revise [label="[R] Revise"]
		ship -> exit
		revise -> exit
	}`
	for _, tc := range []struct{ answer, want string }{
		{"A", "ship"}, {"r", "revise"}, {"Approve", "ship"}, {"[R] Revise", "revise"},
	} {
		t.Run(tc.answer, func(t *testing.T) {
			r := newRun(t)
			r.answers = map[string][]string{"review": {tc.answer}}
			rep := r.exec(src)
			require.Equal(t, "success", rep.Status, rep.Reason)
			require.Contains(t, r.visits(), tc.want)
			require.Len(t, r.visits(), 4)
		})
	}
	t.Run("no answer fails", func(t *testing.T) {
		r := newRun(t)
		rep := r.exec(src)
		require.Equal(t, "fail", rep.Status)
	})
}

func TestEdgeSelectionAtRuntime(t *testing.T) {
	for _, tc := range []struct {
		name, edges, want string
	}{
		{"condition beats weight", `w -> b [weight=10]; w -> c [condition="outcome=success"]`, "c"},
		{"weight breaks ties", `w -> b [weight=1]; w -> c [weight=5]`, "c"},
		{"lexical last", `w -> c; w -> b`, "b"},
		{"preferred label", `w -> b [label="Left"]; w -> c [label="Right"]`, "c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRun(t)
			r.mock = `{"w":[{"status":"success","preferred_label":"right"}]}`
			if tc.name != "preferred label" {
				r.mock = ""
			}
			rep := r.exec(`digraph sel {
				start [shape=Mdiamond]; w [prompt="x"]; b [prompt="b"]; c [prompt="c"]; exit [shape=Msquare]
				start -> w
				` + tc.edges + `
				b -> exit; c -> exit
			}`)
			require.Equal(t, "success", rep.Status, rep.Reason)
			require.Equal(t, []string{"start", "w", tc.want, "exit"}, r.visits())
		})
	}
}

func TestContextFlows(t *testing.T) {
	r := newRun(t)
	r.mock = `{"a":[{"status":"success","context_updates":{"ticket":"SY-42"}}]}`
	rep := r.exec(`digraph ctx {
		start [shape=Mdiamond]; a [prompt="a"]; b [prompt="b"]; c [prompt="c"]; exit [shape=Msquare]
		start -> a -> route
		route [shape=diamond]
		route -> b [condition="context.ticket=SY-42"]
		route -> c [condition="context.ticket!=SY-42"]
		b -> exit; c -> exit
	}`)
	require.Equal(t, "success", rep.Status, rep.Reason)
	require.Contains(t, r.visits(), "b")
	require.Contains(t, r.file("checkpoint.json"), `"ticket": "SY-42"`)
}

func TestFailedNodeWithoutRouteFailsRun(t *testing.T) {
	r := newRun(t)
	r.mock = `{"a":[{"status":"fail","notes":"broken"}]}`
	rep := r.exec(`digraph f { start [shape=Mdiamond]; a [prompt="a"]; b [prompt="b"]; exit [shape=Msquare]; start -> a -> b -> exit }`)
	require.Equal(t, "fail", rep.Status)
	// A failed node never falls through to work (decision 3): b never ran.
	require.NotContains(t, r.visits(), "b")
	require.Contains(t, rep.Reason, "a")
}

func TestFailureRoutesToFailEdge(t *testing.T) {
	r := newRun(t)
	r.mock = `{"a":[{"status":"fail"}]}`
	rep := r.exec(`digraph f {
		start [shape=Mdiamond]; a [prompt="a"]; b [prompt="b"]; recover [prompt="r"]; exit [shape=Msquare]
		start -> a
		a -> b
		a -> recover [condition="outcome=fail"]
		b -> exit; recover -> exit
	}`)
	require.Equal(t, "success", rep.Status, rep.Reason)
	require.Equal(t, []string{"start", "a", "recover", "exit"}, r.visits())
}

func TestParallelFanOutFanIn(t *testing.T) {
	r := newRun(t)
	r.mock = `{"b2":[{"status":"success","context_updates":{"finding":"sql injection"}}]}`
	rep := r.exec(`digraph par {
		start [shape=Mdiamond]
		fork [shape=component]
		b1 [prompt="one"]; b2 [prompt="two"]; b3 [prompt="three"]
		join [shape=tripleoctagon]
		after [prompt="after"]
		exit [shape=Msquare]
		start -> fork
		fork -> b1 -> join
		fork -> b2 -> join
		fork -> b3 -> join
		join -> after -> exit
	}`)
	require.Equal(t, "success", rep.Status, rep.Reason)
	v := r.visits()
	require.ElementsMatch(t, []string{"start", "fork", "b1", "b2", "b3", "join", "after", "exit"}, v)
	require.Equal(t, 1, rep.Node("join").Visits, "the fan-in fires once for all branches")
	// Nothing a branch learned is lost (decision 6).
	cp := r.file("checkpoint.json")
	require.Contains(t, cp, `"parallel.b2.finding": "sql injection"`)
	require.Contains(t, cp, `parallel.results`)
}

func TestParallelBranchFailureIsPartial(t *testing.T) {
	r := newRun(t)
	r.mock = `{"b2":[{"status":"fail"}]}`
	rep := r.exec(`digraph par {
		start [shape=Mdiamond]; fork [shape=component]
		b1 [prompt="one"]; b2 [prompt="two"]
		join [shape=tripleoctagon]; exit [shape=Msquare]
		start -> fork; fork -> b1 -> join; fork -> b2 -> join; join -> exit
	}`)
	require.Equal(t, "success", rep.Status, rep.Reason)
	require.Equal(t, "partial_success", rep.Node("join").Status)
}

func TestCustomHandler(t *testing.T) {
	r := newRun(t)
	var calls atomic.Int32
	r.reg = func(reg *nodes.Registry) {
		require.NoError(t, reg.Register(nodes.Info{Type: "custom.echo", Handler: nodes.HandlerFunc(
			func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
				calls.Add(1)
				return &nodes.Outcome{Status: nodes.StatusSuccess, Response: "echo " + in.Node.Attrs.String("say"),
					ContextUpdates: map[string]string{"echoed": in.Node.Attrs.String("say")}}, nil
			})}))
	}
	rep := r.exec(`digraph custom {
		start [shape=Mdiamond]; e [type="custom.echo", say="hi"]; exit [shape=Msquare]
		start -> e -> exit
	}`)
	require.Equal(t, "success", rep.Status, rep.Reason)
	require.EqualValues(t, 1, calls.Load())
	require.Equal(t, "echo hi", rep.Node("e").Output)
}

func TestPanickingHandlerFailsNodeNotProcess(t *testing.T) {
	r := newRun(t)
	r.reg = func(reg *nodes.Registry) {
		require.NoError(t, reg.Register(nodes.Info{Type: "custom.echo", Handler: nodes.HandlerFunc(
			func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) { panic("boom") })}))
	}
	rep := r.exec(`digraph p { start [shape=Mdiamond]; e [type="custom.echo"]; exit [shape=Msquare]; start -> e -> exit }`)
	require.Equal(t, "fail", rep.Status)
	require.Contains(t, r.event("node.completed", "e").Message, "boom")
}

func TestTenPlusNodes(t *testing.T) {
	var b strings.Builder
	b.WriteString("digraph big { start [shape=Mdiamond]; exit [shape=Msquare]\n")
	prev := "start"
	for i := 1; i <= 12; i++ {
		fmt.Fprintf(&b, "n%02d [prompt=\"step %d\"]\n%s -> n%02d\n", i, i, prev, i)
		prev = fmt.Sprintf("n%02d", i)
	}
	b.WriteString(prev + " -> exit }")
	r := newRun(t)
	rep := r.exec(b.String())
	require.Equal(t, "success", rep.Status, rep.Reason)
	require.Len(t, r.visits(), 14)
}

func TestMaxVisitsStopsLoop(t *testing.T) {
	r := newRun(t)
	rep := r.exec(`digraph loop {
		graph [max_visits=5, stall_after=0]
		start [shape=Mdiamond]; a [prompt="a"]; b [prompt="b"]; exit [shape=Msquare]
		start -> a -> b
		b -> a [condition="outcome=success"]
		b -> exit [condition="outcome=fail"]
	}`)
	require.Equal(t, "fail", rep.Status)
	require.Contains(t, rep.Reason, "max_visits")
	require.Equal(t, 5, rep.Node("a").Visits)
	require.NotNil(t, r.event("iterations.exceeded", "a"))
}

// TestStallStopsLoop: the same loop, with stall detection on (the default),
// stops when a node gets the same input and repeats the same result three
// times: b, whose input is a's unchanging reply (a's first input came from
// start, so a is one firing behind).
func TestStallStopsLoop(t *testing.T) {
	r := newRun(t)
	r.mock = `{"a":[{"response":"tried again"}],"b":[{"response":"still broken"}]}`
	rep := r.exec(`digraph loop {
		start [shape=Mdiamond]; a [prompt="a"]; b [prompt="b"]; exit [shape=Msquare]
		start -> a -> b
		b -> a [condition="outcome=success"]
		b -> exit [condition="outcome=fail"]
	}`)
	require.Equal(t, "fail", rep.Status)
	require.Contains(t, rep.Reason, "node b stalled: the same input and the same result 3 times in a row")
	require.Equal(t, 3, rep.Node("b").Visits)
	require.NotNil(t, r.event("stall.detected", "b"))
}

func TestToolNode(t *testing.T) {
	r := newRun(t)
	rep := r.exec(`digraph tool {
		start [shape=Mdiamond]
		t1 [shape=parallelogram, tool_command="echo hello-from-tool"]
		t2 [shape=parallelogram, tool_command="exit 3"]
		exit [shape=Msquare]
		start -> t1 -> t2 -> exit
	}`)
	require.Equal(t, "fail", rep.Status)
	require.Equal(t, "success", rep.Node("t1").Status)
	require.Contains(t, r.file("t1", "stdout.txt"), "hello-from-tool")
	require.Equal(t, "fail", rep.Node("t2").Status)
}

// TestLoopRestart follows a loop_restart edge: the run starts again at the
// target with a fresh context (graph keys kept) and a fresh log directory.
func TestLoopRestart(t *testing.T) {
	r := newRun(t)
	r.mock = `{"work":[{"status":"fail","context_updates":{"scratch":"dirty"}},{"status":"success"}]}`
	rep := r.exec(`digraph restart {
		graph [goal="g"]
		start [shape=Mdiamond]
		work [prompt="work"]
		exit [shape=Msquare]
		start -> work
		work -> exit [condition="outcome=success"]
		work -> work [condition="outcome=fail", loop_restart=true]
	}`)
	require.Equal(t, "success", rep.Status, rep.Reason)
	require.Equal(t, 2, rep.Node("work").Visits)
	require.NotNil(t, r.event("session.restarted", "work"))
	require.NotEmpty(t, r.file("restart-1", "work", "prompt.md"), "the second run logs under restart-1/")
	cp := r.file("checkpoint.json")
	require.NotContains(t, cp, `"scratch"`, "the restarted run starts from a fresh context")
	require.Contains(t, cp, `"graph.goal": "g"`)
}

func TestOnFailureSkipAndContinueCarryOn(t *testing.T) {
	for _, tc := range []struct{ policy, status, outcome string }{
		// skip: the node counts as not run; the context's outcome stays the previous node's.
		{"skip", "skipped", "success"},
		{"continue", "partial_success", "partial_success"},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			r := newRun(t)
			r.mock = `{"a":[{"status":"fail","notes":"broken"}]}`
			r.reg = func(reg *nodes.Registry) {
				require.NoError(t, reg.Register(nodes.Info{Type: "custom.echo", Handler: nodes.HandlerFunc(
					func(_ context.Context, in *nodes.Input) (*nodes.Outcome, error) {
						return &nodes.Outcome{Status: nodes.StatusSuccess, Response: "outcome was " + in.Context["outcome"]}, nil
					})}))
			}
			rep := r.exec(`digraph f { start [shape=Mdiamond]; a [prompt="a", on_failure=` + tc.policy + `, max_retries=1, retry_on_fail=true];
				b [type="custom.echo"]; exit [shape=Msquare]; start -> a -> b -> exit }`)
			require.Equal(t, "success", rep.Status, rep.Reason)
			require.Equal(t, []string{"start", "a", "b", "exit"}, r.visits())
			ev := r.event("node.completed", "a")
			require.Equal(t, tc.status, ev.Status)
			require.EqualValues(t, 2, ev.Attempts, "retries are spent before the policy applies")
			require.Contains(t, attr(ev, "failure_reason"), "broken")
			require.Equal(t, "outcome was "+tc.outcome, rep.Node("b").Output)
		})
	}
}

func attr(ev *pb.Event, key string) string {
	for _, kv := range ev.GetAttrs() {
		if kv.GetKey() == key {
			return kv.GetValue()
		}
	}
	return ""
}

// In a pipeline too, a join says it waits once per wait: the first branch
// to arrive makes it wait for the other, once.
func TestPipelineJoinSaysItWaitsOnce(t *testing.T) {
	r := newRun(t)
	rep := r.exec(`digraph par {
		start [shape=Mdiamond]; fork [shape=component]
		x [prompt="x"]; y [prompt="y"]; j [prompt="join", trigger=all]
		exit [shape=Msquare]
		start -> fork; fork -> x -> j; fork -> y -> j; j -> exit
	}`)
	require.Equal(t, "success", rep.Status, rep.Reason)
	var waits []string
	r.mu.Lock()
	for _, ev := range r.events {
		if ev.Kind == "gate.waiting" && ev.Node == "j" {
			waits = append(waits, ev.Message)
		}
	}
	r.mu.Unlock()
	require.Len(t, waits, 1, "%q", waits)
	require.Contains(t, waits[0], "join incomplete")
}
