package nodes_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/nodes/agent"
)

func load(t *testing.T, src string) *graph.Graph {
	t.Helper()
	g, diags := graph.Load("t.dot", []byte(src))
	require.False(t, diags.HasErrors(), "%v", diags)
	return g
}

func input(t *testing.T, g *graph.Graph, node string) *nodes.Input {
	dir := t.TempDir()
	n := g.Node(node)
	return &nodes.Input{SessionID: "s1", Graph: g, Node: n, Type: g.HandlerType(n), Context: map[string]string{},
		Prompt: n.Prompt(), LogsDir: dir, StageDir: filepath.Join(dir, node), WorkDir: dir, Attempt: 1, AttemptID: "s1/" + node + "/1/1"}
}

func registry(t *testing.T, deps nodes.Deps) *nodes.Registry {
	r := nodes.NewRegistry()
	require.NoError(t, nodes.RegisterBuiltins(r, deps))
	return r
}

func handle(t *testing.T, r *nodes.Registry, in *nodes.Input) *nodes.Outcome {
	t.Helper()
	h, ok := r.Lookup(in.Type)
	require.True(t, ok, in.Type)
	o, err := h.Handle(context.Background(), in)
	require.NoError(t, err)
	return o
}

func TestRegistry(t *testing.T) {
	r := registry(t, nodes.Deps{})
	require.Equal(t, []string{"codergen", "conditional", "exit", "parallel", "parallel.fan_in", "stack.manager_loop", "start", "tool", "wait.human"}, r.Types())
	h := nodes.HandlerFunc(func(context.Context, *nodes.Input) (*nodes.Outcome, error) { return nil, nil })
	require.ErrorIs(t, r.Register(nodes.Info{Type: "codergen", Handler: h}), nodes.ErrDuplicate, "replacing is deliberate")
	require.NoError(t, r.Replace(nodes.Info{Type: "codergen", Handler: h}))
	for _, bad := range []string{"", ".x", "x.", "a..b", "1x", "a b", "a-b"} {
		require.ErrorIs(t, r.Register(nodes.Info{Type: bad, Handler: h}), nodes.ErrInvalidType, bad)
	}
	require.NoError(t, r.Register(nodes.Info{Type: "my.custom_2", Handler: h}))
}

const codergenGraph = `digraph c { goal="Ship"; start [shape=Mdiamond]; work [prompt="Build $goal", llm_model="m1"]; exit [shape=Msquare]; start -> work -> exit }`

func TestCodergenWritesStageFiles(t *testing.T) {
	g := load(t, codergenGraph)
	mock := agent.NewMock(map[string][]agent.MockResult{"work": {{Status: "success", Response: "built it",
		Usage: &agent.MockUsage{InputTokens: 10, OutputTokens: 5, Cost: 0.01}}}})
	r := registry(t, nodes.Deps{Providers: func(string) (agent.Provider, error) { return mock, nil }})
	in := input(t, g, "work")
	in.Context["graph.goal"] = "Ship"
	o := handle(t, r, in)
	require.Equal(t, nodes.StatusSuccess, o.Status)
	require.Equal(t, "built it", o.Response)
	require.Equal(t, int64(10), o.Usage.InputTokens)
	require.Equal(t, "work", o.ContextUpdates["last_stage"])
	prompt, _ := os.ReadFile(filepath.Join(in.StageDir, "prompt.md"))
	require.Contains(t, string(prompt), "Build Ship")
	require.Contains(t, string(prompt), "Goal: Ship")
	resp, _ := os.ReadFile(filepath.Join(in.StageDir, "response.md"))
	require.Equal(t, "built it", string(resp))
	sf, ok, err := nodes.ReadStatusFile(in.StageDir)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "success", sf.Outcome)
}

// statusWriter is an agent that writes status.json in its stage directory.
type statusWriter struct{ body string }

func (s statusWriter) Name() string { return "writer" }
func (s statusWriter) Run(_ context.Context, req *agent.Request, _ func(agent.Event)) (*agent.Result, error) {
	if err := os.MkdirAll(req.StageDir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(req.StageDir, "status.json"), []byte(s.body), 0o644); err != nil {
		return nil, err
	}
	return &agent.Result{Text: "wrote status", Success: true, Status: "success"}, nil
}

func TestStatusFileWins(t *testing.T) {
	g := load(t, codergenGraph)
	for _, tc := range []struct {
		body   string
		status nodes.Status
		label  string
	}{
		{`{"outcome":"fail","notes":"tests red"}`, nodes.StatusFail, ""},
		{`{"outcome":"success","preferred_next_label":"Ship it","context_updates":{"n":3}}`, nodes.StatusSuccess, "Ship it"},
		{`{"outcome":"needs_dod"}`, "needs_dod", ""},
		{`{"status":"success"}`, nodes.StatusFail, ""}, // outcome is required
	} {
		t.Run(tc.body, func(t *testing.T) {
			r := registry(t, nodes.Deps{Providers: func(string) (agent.Provider, error) { return statusWriter{tc.body}, nil }})
			o := handle(t, r, input(t, g, "work"))
			require.Equal(t, tc.status, o.Status)
			require.Equal(t, tc.label, o.PreferredLabel)
		})
	}
}

func TestProviderErrorsAreClassified(t *testing.T) {
	g := load(t, codergenGraph)
	for _, tc := range []struct {
		kind      string
		retryable bool
	}{{"rate_limit", true}, {"network", true}, {"auth", false}, {"bad_request", false}} {
		mock := agent.NewMock(map[string][]agent.MockResult{"work": {{Error: tc.kind}}})
		r := registry(t, nodes.Deps{Providers: func(string) (agent.Provider, error) { return mock, nil }})
		o := handle(t, r, input(t, g, "work"))
		require.Equal(t, nodes.StatusFail, o.Status, tc.kind)
		require.Equal(t, tc.retryable, o.Retryable, tc.kind)
		require.Contains(t, o.FailureReason, tc.kind)
	}
}

func TestDetectOutcomeMarker(t *testing.T) {
	for _, tc := range []struct {
		text string
		want nodes.Status
		ok   bool
	}{
		{"All good. OUTCOME:PASS", nodes.StatusSuccess, true},
		{"outcome=success", nodes.StatusSuccess, true},
		{"OUTCOME: FAIL because tests broke", nodes.StatusFail, true},
		{"OUTCOME:PASS ... later OUTCOME:FAIL", nodes.StatusFail, true},
		{"no marker here", "", false},
		{"OUTCOMES:PASS", "", false},
	} {
		got, ok := nodes.DetectOutcomeMarker(tc.text)
		require.Equal(t, tc.ok, ok, tc.text)
		require.Equal(t, tc.want, got, tc.text)
	}
}

func TestConditional(t *testing.T) {
	g := load(t, `digraph c { start [shape=Mdiamond]; plain [shape=diamond]; hybrid [shape=diamond, prompt="Run the tests"]; exit [shape=Msquare]; start -> plain -> hybrid -> exit }`)
	r := registry(t, nodes.Deps{})
	in := input(t, g, "plain")
	in.Context["outcome"] = "fail"
	in.Context["preferred_label"] = "retry"
	o := handle(t, r, in)
	require.Equal(t, nodes.StatusFail, o.Status, "a diamond without prompt passes the outcome through")
	require.Equal(t, "retry", o.PreferredLabel)

	for _, tc := range []struct {
		mock agent.MockResult
		want nodes.Status
	}{
		{agent.MockResult{Status: "success", Response: "ran them. OUTCOME:FAIL"}, nodes.StatusFail},
		{agent.MockResult{Status: "success", Response: "OUTCOME=PASS"}, nodes.StatusSuccess},
		{agent.MockResult{Status: "fail", Response: "crashed"}, nodes.StatusFail},
		{agent.MockResult{Status: "success", Response: "fine"}, nodes.StatusSuccess},
	} {
		mock := agent.NewMock(map[string][]agent.MockResult{"hybrid": {tc.mock}})
		r := registry(t, nodes.Deps{Providers: func(string) (agent.Provider, error) { return mock, nil }})
		o := handle(t, r, input(t, g, "hybrid"))
		require.Equal(t, tc.want, o.Status, tc.mock.Response)
		require.Equal(t, 1, mock.Runs("hybrid"), "the hybrid diamond runs its agent")
	}
}

func TestToolNode(t *testing.T) {
	g := load(t, `digraph t {
		start [shape=Mdiamond]
		ok [shape=parallelogram, tool_command="echo out; echo err >&2; echo $SWITCHYARD_NODE"]
		bad [shape=parallelogram, tool_command="echo nope >&2; exit 7"]
		hook [shape=parallelogram, tool_command="echo ran > ran.txt", tool_hooks.pre="exit 1"]
		none [shape=parallelogram]
		exit [shape=Msquare]
		start -> ok -> bad -> hook -> none -> exit
	}`)
	r := registry(t, nodes.Deps{})
	in := input(t, g, "ok")
	o := handle(t, r, in)
	require.Equal(t, nodes.StatusSuccess, o.Status)
	require.Equal(t, "out\nok", o.ContextUpdates["tool.output"])
	stderr, _ := os.ReadFile(filepath.Join(in.StageDir, "stderr.txt"))
	require.Equal(t, "err\n", string(stderr))

	o = handle(t, r, input(t, g, "bad"))
	require.Equal(t, nodes.StatusFail, o.Status)
	require.Contains(t, o.FailureReason, "exit status 7")
	require.Contains(t, o.FailureReason, "nope")

	in = input(t, g, "hook")
	o = handle(t, r, in)
	require.Equal(t, nodes.StatusSkipped, o.Status, "a failing pre-hook skips the call")
	_, err := os.Stat(filepath.Join(in.WorkDir, "ran.txt"))
	require.True(t, os.IsNotExist(err))

	o = handle(t, r, input(t, g, "none"))
	require.Equal(t, nodes.StatusFail, o.Status)
}

// TestToolTimeoutKillsProcessGroup runs a command that starts a child and
// hangs; the deadline must kill both.
func TestToolTimeoutKillsProcessGroup(t *testing.T) {
	g := load(t, `digraph t { start [shape=Mdiamond]; hang [shape=parallelogram, tool_command="sleep 300 & echo $! > child.pid; wait"]; exit [shape=Msquare]; start -> hang -> exit }`)
	r := registry(t, nodes.Deps{})
	in := input(t, g, "hang")
	h, _ := r.Lookup("tool")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *nodes.Outcome, 1)
	go func() {
		o, _ := h.Handle(ctx, in)
		done <- o
	}()
	pidFile := filepath.Join(in.WorkDir, "child.pid")
	deadline := time.Now().Add(10 * time.Second)
	var pid string
	for pid == "" {
		data, _ := os.ReadFile(pidFile)
		pid = strings.TrimSpace(string(data))
		require.True(t, time.Now().Before(deadline), "the command never started its child")
		if pid == "" {
			select {
			case <-time.After(10 * time.Millisecond): // poll interval of a deadline-bounded wait
			}
		}
	}
	cancel()
	select {
	case o := <-done:
		require.Equal(t, nodes.StatusFail, o.Status)
		require.Contains(t, o.FailureReason, "timeout")
	case <-time.After(10 * time.Second):
		t.Fatal("the tool did not stop when its context ended")
	}
	_, err := os.Stat("/proc/" + pid)
	for err == nil && time.Now().Before(deadline) {
		// a killed process may linger as a zombie until reaped by init
		st, _ := os.ReadFile("/proc/" + pid + "/stat")
		if strings.Contains(string(st), ") Z ") {
			break
		}
		select {
		case <-time.After(10 * time.Millisecond):
		}
		_, err = os.Stat("/proc/" + pid)
	}
	st, _ := os.ReadFile("/proc/" + pid + "/stat")
	require.True(t, err != nil || strings.Contains(string(st), ") Z "), "the grandchild sleep is still running")
}

func TestFanInMerges(t *testing.T) {
	g := load(t, `digraph p { start [shape=Mdiamond]; f [shape=component]; a [prompt="a"]; b [prompt="b"]; j [shape=tripleoctagon]; exit [shape=Msquare]; start -> f; f -> a -> j; f -> b -> j; j -> exit }`)
	r := registry(t, nodes.Deps{})
	in := input(t, g, "j")
	in.Messages = []nodes.Message{
		{Branch: "a", Status: nodes.StatusSuccess, Updates: map[string]string{"finding": "none", "internal.x": "1"}, Response: "a ok"},
		{Branch: "b", Status: nodes.StatusFail, Updates: map[string]string{"finding": "bug"}, Response: "b broke"},
	}
	o := handle(t, r, in)
	require.Equal(t, nodes.StatusPartial, o.Status)
	require.Equal(t, "none", o.ContextUpdates["parallel.a.finding"])
	require.Equal(t, "bug", o.ContextUpdates["parallel.b.finding"])
	require.NotContains(t, o.ContextUpdates, "parallel.a.internal.x")
	require.Equal(t, "a", o.ContextUpdates["parallel.fan_in.best_id"])
	require.JSONEq(t, `[{"branch":"a","status":"success","response":"a ok"},{"branch":"b","status":"fail","response":"b broke"}]`, o.ContextUpdates["parallel.results"])

	in.Messages[0].Status = nodes.StatusFail
	require.Equal(t, nodes.StatusFail, handle(t, r, in).Status, "all failed")
	in.Messages = nil
	require.Equal(t, nodes.StatusFail, handle(t, r, in).Status, "no inputs")
}

func TestMockScript(t *testing.T) {
	m, err := agent.ParseMock([]byte(`{"a":[{"status":"fail"},{"status":"success","response":"second"}]}`))
	require.NoError(t, err)
	run := func(node string) *agent.Result {
		res, err := m.Run(context.Background(), &agent.Request{NodeID: node, Prompt: "Goal: g\n\nDo the thing\nmore"}, nil)
		require.NoError(t, err)
		return res
	}
	require.Equal(t, "fail", run("a").Status)
	require.Equal(t, "second", run("a").Text)
	require.Equal(t, "second", run("a").Text, "the last entry repeats")
	require.Contains(t, run("b").Text, "[mock] b: done: Do the thing (prompt ", "unlisted nodes succeed with a canned response")

	for _, bad := range []string{`{"a":[]}`, `{"a":[{"statuz":"x"}]}`, `{"a":[{"error":"meteor"}]}`, `[1]`} {
		_, err := agent.ParseMock([]byte(bad))
		require.Error(t, err, bad)
	}
}

func TestMiddleware(t *testing.T) {
	var order []string
	mw := func(name string) nodes.Middleware {
		return func(next nodes.Handler) nodes.Handler {
			return nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
				order = append(order, name)
				return next.Handle(ctx, in)
			})
		}
	}
	panicky := nodes.HandlerFunc(func(context.Context, *nodes.Input) (*nodes.Outcome, error) { panic("kaboom") })
	h := nodes.Chain(panicky, mw("outer"), mw("inner"), nodes.Recover())
	o, err := h.Handle(context.Background(), &nodes.Input{})
	require.Error(t, err)
	require.Nil(t, o)
	require.Contains(t, err.Error(), "kaboom")
	require.Equal(t, []string{"outer", "inner"}, order)

	slow := nodes.HandlerFunc(func(ctx context.Context, _ *nodes.Input) (*nodes.Outcome, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	_, err = nodes.Chain(slow, nodes.Timeout(time.Millisecond)).Handle(context.Background(), &nodes.Input{})
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// failing is an agent that reports failure without an explicit status.
type failing struct{}

func (failing) Name() string { return "failing" }
func (failing) Run(context.Context, *agent.Request, func(agent.Event)) (*agent.Result, error) {
	return &agent.Result{Text: "could not tell", Success: false}, nil
}

// TestAutoStatus: with auto_status=true, an agent that wrote no status
// succeeds (appendix C).
func TestAutoStatus(t *testing.T) {
	for _, tc := range []struct {
		attrs string
		want  nodes.Status
	}{{"", nodes.StatusFail}, {", auto_status=true", nodes.StatusSuccess}} {
		g := load(t, `digraph a { start [shape=Mdiamond]; w [prompt="w"`+tc.attrs+`]; exit [shape=Msquare]; start -> w -> exit }`)
		r := registry(t, nodes.Deps{Providers: func(string) (agent.Provider, error) { return failing{}, nil }})
		require.Equal(t, tc.want, handle(t, r, input(t, g, "w")).Status, tc.attrs)
	}
}
