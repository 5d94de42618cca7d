package graph_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph"
)

// equalModels compares two graphs, ignoring positions.
func equalModels(t *testing.T, a, b *graph.Graph) {
	t.Helper()
	require.Equal(t, summary(a), summary(b))
}

// TestRoundTrip prints every graph of testdata that loads and checks that
// the canonical DOT re-parses to an equal model, and is a fixed point.
func TestRoundTrip(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.dottest")
	n := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		src, _, _ := strings.Cut(string(data), sep)
		g, err := graph.Parse(f, []byte(src))
		if err != nil {
			continue
		}
		n++
		t.Run(filepath.Base(f), func(t *testing.T) {
			out := g.DOT()
			g2, err := graph.Parse("printed.dot", []byte(out))
			require.NoError(t, err, "printed:\n%s", out)
			equalModels(t, g, g2)
			require.Equal(t, out, g2.DOT())
		})
	}
	require.Greater(t, n, 10)
}

func TestBuilderMatchesDOT(t *testing.T) {
	b := graph.New("review", graph.KV{"goal": "Review the PR"})
	b.Node("start", graph.KV{"shape": "Mdiamond"}).
		Node("review", graph.KV{"prompt": "Review: $goal", "max_retries": "2"}).
		Node("exit", graph.KV{"shape": "Msquare"}).
		Edge("start", "review").
		Edge("review", "exit", graph.KV{"condition": "outcome=success"}).
		Edge("review", "review", graph.KV{"condition": "outcome=fail"})
	g, diags := b.Build()
	require.False(t, diags.HasErrors(), "%v", diags)
	require.Equal(t, "Review: Review the PR", g.Node("review").Prompt(), "$goal expands for built graphs too")
	require.NotNil(t, g.Edges[1].Cond, "conditions are compiled")
	require.Equal(t, 2, g.Node("review").MaxRetries(g))

	fromDOT, diags := graph.Load("review.dot", []byte(g.DOT()))
	require.False(t, diags.HasErrors(), "%v", diags)
	equalModels(t, g, fromDOT)
}

func TestBuilderValidatesWithTheSameRules(t *testing.T) {
	_, diags := graph.New("bad").Node("a", graph.KV{"prompt": "x"}).Node("my node").Node("edge").Edge("a", "b").Build()
	var rules []string
	for _, d := range diags.Errors() {
		rules = append(rules, d.Rule)
	}
	require.ElementsMatch(t, []string{"start_node", "terminal_node", "edge_target_exists", "node_id", "node_id"}, rules)
}

func TestCustomRulesAndTransforms(t *testing.T) {
	var order []string
	tr := func(name string) graph.Transform {
		return graph.TransformFunc{N: name, F: func(g *graph.Graph) graph.Diagnostics {
			order = append(order, name)
			if name == "first" {
				// Transforms run after $goal expansion and before validation.
				require.Equal(t, "do G", g.Node("a").Prompt())
				g.Node("a").Attrs.Set("owner", "team-x")
			}
			return nil
		}}
	}
	rule := graph.NewRule("needs_owner", func(g *graph.Graph) graph.Diagnostics {
		var ds graph.Diagnostics
		for _, n := range g.Nodes {
			if g.HandlerType(n) == graph.TypeCodergen && n.Attrs.String("owner") == "" {
				ds = append(ds, graph.Diagnostic{Pos: n.Pos, Severity: graph.SeverityError, Rule: "needs_owner", NodeID: n.ID, Message: "no owner"})
			}
		}
		return ds
	})
	src := `digraph t { goal="G"; start [shape=Mdiamond]; a [prompt="do $goal"]; b [prompt="b"]; exit [shape=Msquare]; start -> a -> b -> exit }`
	_, diags := graph.Load("t.dot", []byte(src), graph.WithTransforms(tr("first"), tr("second")), graph.WithRules(rule))
	require.Equal(t, []string{"first", "second"}, order)
	require.Len(t, diags.Errors(), 1)
	require.Equal(t, "b", diags.Errors()[0].NodeID)
	require.Equal(t, "t.dot:1:70: error: needs_owner: no owner", diags.Errors()[0].String())
}

func TestKnownTypes(t *testing.T) {
	src := `digraph t { start [shape=Mdiamond]; a [type="my.handler"]; exit [shape=Msquare]; start -> a -> exit }`
	_, diags := graph.Load("t.dot", []byte(src))
	require.Len(t, diags, 1)
	require.Equal(t, "type_known", diags[0].Rule)
	_, diags = graph.Load("t.dot", []byte(src), graph.WithKnownTypes(append(graph.BuiltinTypes, "my.handler")...))
	require.Empty(t, diags)
}

func TestBinaryInput(t *testing.T) {
	for _, src := range [][]byte{{0x00, 0x01, 0x02}, []byte("digraph a {\n \xff\xfe }")} {
		_, diags := graph.Load("bin.dot", src)
		require.Len(t, diags, 1)
		require.Equal(t, "binary_input", diags[0].Rule)
	}
	_, diags := graph.Load("bin.dot", []byte("digraph a {\n \xff }"))
	require.Equal(t, "bin.dot:2:2: error: binary_input: the file is not UTF-8 text", diags[0].String())
}

func TestSessionNeedsNoTerminals(t *testing.T) {
	src := `digraph s { a [prompt="a"]; b [prompt="b"]; a -> b -> a }`
	_, diags := graph.Load("s.dot", []byte(src))
	require.True(t, diags.HasErrors(), "a pipeline needs start and exit")
	g, diags := graph.Load("s.dot", []byte(src), graph.AsSession())
	require.Empty(t, diags)
	require.Equal(t, "session", g.Kind())
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{"250ms": 250 * time.Millisecond, "30s": 30 * time.Second,
		"15m": 15 * time.Minute, "2h": 2 * time.Hour, "1d": 24 * time.Hour, "600": 600 * time.Second} {
		got, err := graph.ParseDuration(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "1.5s", "-1s", "10x", "s", "+5s", "99999999999999999d"} {
		_, err := graph.ParseDuration(bad)
		require.Error(t, err, bad)
	}
}

func TestAccessorsAndDefaults(t *testing.T) {
	g, diags := graph.Load("a.dot", []byte(`digraph a {
		default_max_retry=4
		start [shape=Mdiamond]
		a [timeout=600, fidelity=full]
		b [max_retries=1, timeout=2m]
		exit [shape=Msquare]
		start -> a -> b -> exit
	}`))
	require.False(t, diags.HasErrors(), "%v", diags)
	require.Equal(t, 4, g.Node("a").MaxRetries(g), "default_max_retry is an alias")
	require.Equal(t, 1, g.Node("b").MaxRetries(g))
	d, ok := g.Node("a").Timeout()
	require.True(t, ok)
	require.Equal(t, 600*time.Second, d, "a bare integer timeout is seconds")
	require.Equal(t, "full", g.Node("a").Fidelity(g))
	require.Equal(t, "compact", g.Node("b").Fidelity(g))
	require.Equal(t, 100, g.MaxVisits())
	require.Equal(t, 10000, g.MaxIterations())
	require.Equal(t, "start", g.StartNode().ID)
	require.Equal(t, "exit", g.ExitNode().ID)
}

// FuzzLoad: parse+validate never panics or hangs, whatever the input, and
// a graph that loads prints to DOT that loads again.
func FuzzLoad(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.dottest")
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		src, _, _ := strings.Cut(string(data), sep)
		f.Add([]byte(src))
	}
	// The hostile files of issue 15: refused (or answered) at once.
	f.Add(nestedSubgraphsSrc(100_000))
	f.Add(undeclaredEdgesSrc(100_000))
	examples, _ := filepath.Glob("../examples/*.dot")
	for _, p := range examples {
		data, _ := os.ReadFile(p)
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		g, diags := graph.Load("fuzz.dot", src)
		for _, d := range diags {
			if d.Pos.Line < 0 || d.Pos.Col < 0 {
				t.Fatalf("bad position %v", d)
			}
		}
		if g == nil {
			return
		}
		g2, err := graph.Parse("printed.dot", []byte(g.DOT()))
		if err != nil {
			t.Fatalf("printed graph does not parse: %v\n%s", err, g.DOT())
		}
		if g.DOT() != g2.DOT() {
			t.Fatalf("printing is not a fixed point:\n%s\n---\n%s", g.DOT(), g2.DOT())
		}
	})
}

func TestBuilderSubgraphs(t *testing.T) {
	g, diags := graph.New("s", graph.KV{"kind": "session"}).
		Node("a", graph.KV{"prompt": "a"}).
		Subgraph("cluster_team", graph.KV{"label": "Team A", "budget_tokens": "500"}, "a", "b").
		Edge("a", "b").
		Build()
	require.False(t, diags.HasErrors(), "%v", diags)
	require.Len(t, g.Subgraphs, 1)
	require.Equal(t, []string{"a", "b"}, g.Subgraphs[0].Nodes)
	require.Equal(t, []string{"team-a"}, g.Node("b").Classes)

	fromDOT, diags := graph.Load("s.dot", []byte(g.DOT()))
	require.False(t, diags.HasErrors(), "%v", diags)
	equalModels(t, g, fromDOT)
	require.Equal(t, "500", fromDOT.Subgraphs[0].Attrs.String("budget_tokens"))
}

func TestDiagnosticsErr(t *testing.T) {
	tests := []struct {
		name string
		src  string
		err  string
	}{
		{"valid", `digraph a { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }`, ""},
		{"warnings only", `digraph a { start [shape=Mdiamond]; exit [shape=Msquare]; x [prompt="x"]; start -> exit }`, ""},
		{"errors", `digraph a { start [shape=Mdiamond]; start -> start }`,
			"graph: invalid graph:\na.dot:1:1: error: terminal_node: the graph has no exit node (fix: add exit [shape=Msquare])\n" +
				"a.dot:1:37: error: start_no_incoming: the start node start has an incoming edge from start"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, diags := graph.Load("a.dot", []byte(tt.src))
			err := diags.Err()
			if tt.err == "" {
				require.NoError(t, err)
				return
			}
			var verr *graph.ValidationError
			require.ErrorAs(t, err, &verr)
			require.Equal(t, tt.err, err.Error())
		})
	}
	_, err := graph.Parse("p.dot", []byte("digraph { a -- b }"))
	var list graph.ErrorList
	require.ErrorAs(t, err, &list)
	require.Equal(t, "p.dot:1:13: error: undirected_edge: undirected edges '--' are not supported: use '->'", list.Err().Error())
	require.NoError(t, graph.ErrorList(nil).Err())
}

// TestOutEdges: the edges out of a node, in declaration order, for small
// graphs and for graphs past the size where Outgoing uses its index; what
// Outgoing returns, without a copy.
func TestOutEdges(t *testing.T) {
	for _, n := range []int{3, 40} {
		b := graph.New("g")
		for i := range n {
			b.Node(fmt.Sprintf("n%d", i))
		}
		for i := range n {
			b.Edge(fmt.Sprintf("n%d", i), fmt.Sprintf("n%d", (i+1)%n))
			b.Edge(fmt.Sprintf("n%d", i), fmt.Sprintf("n%d", (i+2)%n))
		}
		g, _ := b.Build()
		require.NotNil(t, g)
		for _, nd := range g.Nodes {
			out := g.OutEdges(nd.ID)
			require.Equal(t, g.Outgoing(nd.ID), out)
			require.Len(t, out, 2)
			require.Equal(t, nd.ID, out[0].From)
		}
		require.Empty(t, g.OutEdges("nosuch"))
	}
}

// TestDeriveOncePerGraph: what Derive makes of a graph is made once per
// key while its nodes and edges are the same, and again once they change.
func TestDeriveOncePerGraph(t *testing.T) {
	g, err := graph.Parse("d.dot", []byte(`digraph d { a -> b }`))
	require.NoError(t, err)
	type edgesKey struct{}
	type nodesKey struct{}
	made := 0
	count := func(g *graph.Graph) any { made++; return len(g.Edges) }
	require.Equal(t, 1, g.Derive(edgesKey{}, count))
	require.Equal(t, 1, g.Derive(edgesKey{}, count))
	require.Equal(t, 1, made, "made again for an unchanged graph")
	require.Equal(t, 2, g.Derive(nodesKey{}, func(g *graph.Graph) any { return len(g.Nodes) }))
	require.Equal(t, 1, g.Derive(edgesKey{}, count), "another key's value replaced this one's")
	require.Equal(t, 1, made)

	g.Edges = append(g.Edges, &graph.Edge{From: "b", To: "a"})
	require.Equal(t, 2, g.Derive(edgesKey{}, count), "an edge added, the value stayed")
	require.Equal(t, 2, made)
	c := *g // a copy with other edges makes its own
	c.Edges = c.Edges[:1]
	require.Equal(t, 1, c.Derive(edgesKey{}, count))
	require.Equal(t, 2, g.Derive(edgesKey{}, count))
}
