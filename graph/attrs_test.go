package graph_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph"
)

func load(t *testing.T, src string, opts ...graph.LoadOption) *graph.Graph {
	t.Helper()
	g, diags := graph.Load("t.dot", []byte(src), opts...)
	require.False(t, diags.HasErrors(), "%v", diags)
	require.NotNil(t, g)
	return g
}

// TestAccessorDefaults reads every typed accessor of a node, an edge and
// the graph, once with nothing set (the defaults) and once with values.
func TestAccessorDefaults(t *testing.T) {
	bare := load(t, `digraph g { start [shape=Mdiamond]; a [prompt="p"]; exit [shape=Msquare]; start -> a -> exit }`)
	set := load(t, `digraph g {
		label="L"; retry_target=a; fallback_retry_target=start; default_fidelity="summary:high"
		model_stylesheet="* { llm_model: m1 }"; max_in_flight=3; stall_timeout=2m; workflow_mode=planning
		max_visits=7; max_iterations=9; default_max_retries=2
		start [shape=Mdiamond]
		a [prompt="p", llm_provider=claude, reasoning_effort=low, tool_command="make", retry_on_fail=true,
		   on_failure=exit, trigger=schedule, schedule="@every 1m", join=any, join_timeout=30s, mode=interactive,
		   role=reviewer, locks=" src/ , docs/api.md,", max_visits=4, goal_gate=true, retry_target=start,
		   fallback_retry_target=exit, timeout=90s, auto_status=true, allow_partial=true, thread_id=t1, fidelity=truncate]
		exit [shape=Msquare]
		start -> a [fidelity=full, thread_id=t2, delivery=debounce, debounce=250ms]
		a -> exit
	}`)
	dur := func(d time.Duration, ok bool) any {
		if !ok {
			return "unset"
		}
		return d
	}
	tests := []struct {
		name     string
		get      func(g *graph.Graph) any
		def, val any
	}{
		{"graph label", func(g *graph.Graph) any { return g.Label() }, "", "L"},
		{"graph retry_target", func(g *graph.Graph) any { return g.RetryTarget() }, "", "a"},
		{"graph fallback_retry_target", func(g *graph.Graph) any { return g.FallbackRetryTarget() }, "", "start"},
		{"graph default_fidelity", func(g *graph.Graph) any { return g.DefaultFidelity() }, "compact", "summary:high"},
		{"graph model_stylesheet", func(g *graph.Graph) any { return g.ModelStylesheet() }, "", "* { llm_model: m1 }"},
		{"graph max_in_flight", func(g *graph.Graph) any { return g.MaxInFlight() }, 0, 3},
		{"graph stall_timeout", func(g *graph.Graph) any { return dur(g.StallTimeout()) }, "unset", 2 * time.Minute},
		{"graph workflow_mode", func(g *graph.Graph) any { return g.WorkflowMode() }, "", "planning"},
		{"graph max_visits", func(g *graph.Graph) any { return g.MaxVisits() }, 100, 7},
		{"graph max_iterations", func(g *graph.Graph) any { return g.MaxIterations() }, 10000, 9},
		{"graph kind", func(g *graph.Graph) any { return g.Kind() }, "pipeline", "pipeline"},
		{"node llm_model (stylesheet)", func(g *graph.Graph) any { return g.Node("a").LLMModel() }, "", "m1"},
		{"node llm_provider", func(g *graph.Graph) any { return g.Node("a").LLMProvider() }, "", "claude"},
		{"node reasoning_effort", func(g *graph.Graph) any { return g.Node("a").ReasoningEffort() }, "high", "low"},
		{"node tool_command", func(g *graph.Graph) any { return g.Node("a").ToolCommand() }, "", "make"},
		{"node retry_on_fail", func(g *graph.Graph) any { return g.Node("a").RetryOnFail() }, false, true},
		{"node on_failure", func(g *graph.Graph) any { return g.Node("a").OnFailure() }, "", "exit"},
		{"node trigger", func(g *graph.Graph) any { return g.Node("a").Trigger() }, "", "schedule"},
		{"node schedule", func(g *graph.Graph) any { return g.Node("a").Schedule() }, "", "@every 1m"},
		{"node join", func(g *graph.Graph) any { return g.Node("a").Join() }, "", "any"},
		{"node join_timeout", func(g *graph.Graph) any { return dur(g.Node("a").JoinTimeout()) }, "unset", 30 * time.Second},
		{"node mode", func(g *graph.Graph) any { return g.Node("a").Mode() }, "", "interactive"},
		{"node role", func(g *graph.Graph) any { return g.Node("a").Role() }, "", "reviewer"},
		{"node locks", func(g *graph.Graph) any { return g.Node("a").Locks() }, []string(nil), []string{"src/", "docs/api.md"}},
		{"node max_visits", func(g *graph.Graph) any { return g.Node("a").MaxVisits(g) }, 100, 4},
		{"node max_retries", func(g *graph.Graph) any { return g.Node("a").MaxRetries(g) }, 0, 2},
		{"node goal_gate", func(g *graph.Graph) any { return g.Node("a").GoalGate() }, false, true},
		{"node retry_target", func(g *graph.Graph) any { return g.Node("a").RetryTarget() }, "", "start"},
		{"node fallback_retry_target", func(g *graph.Graph) any { return g.Node("a").FallbackRetryTarget() }, "", "exit"},
		{"node timeout", func(g *graph.Graph) any { return dur(g.Node("a").Timeout()) }, "unset", 90 * time.Second},
		{"node auto_status", func(g *graph.Graph) any { return g.Node("a").AutoStatus() }, false, true},
		{"node allow_partial", func(g *graph.Graph) any { return g.Node("a").AllowPartial() }, false, true},
		{"node thread_id", func(g *graph.Graph) any { return g.Node("a").ThreadID() }, "", "t1"},
		{"node fidelity", func(g *graph.Graph) any { return g.Node("a").Fidelity(g) }, "compact", "truncate"},
		{"node prompt", func(g *graph.Graph) any { return g.Node("a").Prompt() }, "p", "p"},
		{"node label", func(g *graph.Graph) any { return g.Node("a").Label() }, "a", "a"},
		{"edge fidelity", func(g *graph.Graph) any { return g.Edges[0].Fidelity() }, "", "full"},
		{"edge thread_id", func(g *graph.Graph) any { return g.Edges[0].ThreadID() }, "", "t2"},
		{"edge delivery", func(g *graph.Graph) any { return g.Edges[0].Delivery() }, "queue", "debounce"},
		{"edge debounce", func(g *graph.Graph) any { return dur(g.Edges[0].Debounce()) }, "unset", 250 * time.Millisecond},
		{"edge weight", func(g *graph.Graph) any { return g.Edges[0].Weight() }, 0, 0},
		{"resolved fidelity: edge first", func(g *graph.Graph) any { return graph.ResolveFidelity(g, g.Edges[0], g.Node("a")) }, "compact", "full"},
		{"resolved fidelity: then node", func(g *graph.Graph) any { return graph.ResolveFidelity(g, g.Edges[1], g.Node("a")) }, "compact", "truncate"},
		{"resolved fidelity: then graph", func(g *graph.Graph) any { return graph.ResolveFidelity(g, nil, g.Node("exit")) }, "compact", "summary:high"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.def, tt.get(bare), "default")
			require.Equal(t, tt.val, tt.get(set), "set")
		})
	}
}

func TestLookupAttrAndCheck(t *testing.T) {
	tests := []struct {
		scope graph.Scope
		key   string
		value string
		want  string // "" valid, "unknown" not in the table, else the error
	}{
		{graph.ScopeNode, "max_retries", "3", ""},
		{graph.ScopeNode, "max_retries", `3`, ""},
		{graph.ScopeNode, "max_retries", "-1", "want an integer >= 0"},
		{graph.ScopeNode, "max_retries", "many", "want an integer"},
		{graph.ScopeGraph, "max_iterations", "0", ""},
		{graph.ScopeNode, "max_iterations", "100/1h", ""},
		{graph.ScopeNode, "max_visits", "-1", "want a count >= 0 (0: no limit) or COUNT/DURATION like 100/1h"},
		{graph.ScopeNode, "max_visits", "0/1h", "want COUNT/DURATION with 1 <= COUNT <= 1000000"},
		{graph.ScopeGraph, "max_iterations", "100/soon", "want COUNT/DURATION like 100/1h: the window \"soon\" is not a duration > 0"},
		{graph.ScopeNode, "goal_gate", "yes", "want true or false"},
		{graph.ScopeNode, "timeout", "600", ""},
		{graph.ScopeNode, "timeout", "10x", "want a duration like 250ms, 30s, 15m, 2h, 1d"},
		{graph.ScopeEdge, "delivery", "latest", ""},
		{graph.ScopeEdge, "delivery", "newest", "want one of queue, latest, debounce"},
		{graph.ScopeSubgraph, "budget_cost", "2.5", ""},
		{graph.ScopeSubgraph, "budget_cost", "-1", "want a number >= 0"},
		{graph.ScopeNode, "trigger", "cron", "want one of any, all, manual, schedule"},
		{graph.ScopeEdge, "dir", "both", ""},
		{graph.ScopeEdge, "goal", "x", "unknown"},
		{graph.ScopeNode, "my_custom_attr", "x", "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.scope.String()+"/"+tt.key+"="+tt.value, func(t *testing.T) {
			spec, ok := graph.LookupAttr(tt.scope, tt.key)
			if tt.want == "unknown" {
				require.False(t, ok)
				return
			}
			require.True(t, ok)
			err := spec.Check(tt.value)
			if tt.want == "" {
				require.NoError(t, err)
			} else {
				require.EqualError(t, err, tt.want)
			}
		})
	}
	require.Equal(t, "graph,node", (graph.ScopeGraph | graph.ScopeNode).String())
}

// TestReferenceDocumentsEveryAttribute: docs/dot-reference.md names every
// attribute of the table, so the reference cannot fall behind the code.
func TestReferenceDocumentsEveryAttribute(t *testing.T) {
	doc, err := os.ReadFile("../docs/dot-reference.md")
	require.NoError(t, err)
	for _, a := range graph.Attributes() {
		t.Run(a.Key, func(t *testing.T) {
			require.Contains(t, string(doc), "`"+a.Key+"`", "docs/dot-reference.md does not document %s", a.Key)
		})
	}
	for _, r := range graph.BuiltinRules(nil) {
		require.Contains(t, string(doc), "`"+r.Name()+"`", "docs/dot-reference.md does not list the rule %s", r.Name())
	}
	for _, shape := range []string{"Mdiamond", "Msquare", "box", "hexagon", "diamond", "component", "tripleoctagon", "parallelogram", "house"} {
		typ, ok := graph.ShapeType(shape)
		require.True(t, ok)
		require.True(t, strings.Contains(string(doc), "`"+shape+"`") && strings.Contains(string(doc), "`"+typ+"`"), shape)
	}
}

// TestCatchupChecked: a schedule node's catchup (and the graph's) is a
// duration >= 0, refused with its line and column otherwise.
func TestCatchupChecked(t *testing.T) {
	for src, want := range map[string]string{
		"digraph d { kind=session;\n  n [trigger=schedule, schedule=\"@hourly\", catchup=\"soon\"] }":     `d.dot:2:52: error: bad_duration: catchup: bad duration "soon"`,
		"digraph d { kind=session;\n  n [trigger=schedule, schedule=\"@hourly\", catchup=-5m] }":          `d.dot:2:52: error: bad_duration: catchup: bad duration "-5m"`,
		"digraph d { kind=session; catchup=\"2x\"\n  n [trigger=schedule, schedule=\"@hourly\"] }":        `d.dot:1:35: error: bad_duration: catchup: bad duration "2x"`,
		"digraph d { kind=session; catchup=1d\n  n [trigger=schedule, schedule=\"@hourly\", catchup=0] }": "",
	} {
		_, diags := graph.Load("d.dot", []byte(src))
		if want == "" {
			require.False(t, diags.HasErrors(), "%v", diags)
			continue
		}
		require.True(t, diags.HasErrors())
		require.Contains(t, fmt.Sprint(diags), want)
	}
}
