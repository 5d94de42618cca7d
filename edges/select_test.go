package edges_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/edges"
	"github.com/switchyard/switchyard/graph"
)

// g builds a graph with edges from "n" to the given targets.
func g(t *testing.T, es ...*graph.Edge) *graph.Graph {
	gr := &graph.Graph{Name: "t", Attrs: graph.Attrs{}}
	seen := map[string]bool{"n": true}
	gr.Nodes = append(gr.Nodes, &graph.Node{ID: "n", Attrs: graph.Attrs{}})
	for _, e := range es {
		e.From = "n"
		if !seen[e.To] {
			seen[e.To] = true
			gr.Nodes = append(gr.Nodes, &graph.Node{ID: e.To, Attrs: graph.Attrs{}})
		}
		gr.Edges = append(gr.Edges, e)
	}
	return gr
}

func edge(to string, kv ...string) *graph.Edge {
	e := &graph.Edge{To: to, Attrs: graph.Attrs{}}
	for i := 0; i+1 < len(kv); i += 2 {
		e.Attrs.Set(kv[i], kv[i+1])
	}
	return e
}

func TestSelect(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edges []*graph.Edge
		o     edges.Outcome
		ctx   map[string]string
		want  string
	}{
		{"step 1: condition holds", []*graph.Edge{edge("a"), edge("b", "condition", "outcome=success")}, edges.Outcome{Status: "success"}, nil, "b"},
		{"step 1 beats weight", []*graph.Edge{edge("a", "weight", "100"), edge("b", "condition", "outcome=success")}, edges.Outcome{Status: "success"}, nil, "b"},
		{"step 1: best by weight", []*graph.Edge{edge("a", "condition", "outcome=success", "weight", "1"), edge("b", "condition", "outcome=success", "weight", "2")}, edges.Outcome{Status: "success"}, nil, "b"},
		{"step 1: tie by target id", []*graph.Edge{edge("z", "condition", "outcome=success"), edge("m", "condition", "outcome=success")}, edges.Outcome{Status: "success"}, nil, "m"},
		{"step 1: context", []*graph.Edge{edge("a", "condition", "context.k=v"), edge("b")}, edges.Outcome{}, map[string]string{"k": "v"}, "a"},
		{"false condition is no fallback", []*graph.Edge{edge("a", "condition", "outcome=fail")}, edges.Outcome{Status: "success"}, nil, ""},
		{"step 2: preferred label", []*graph.Edge{edge("a", "label", "Approve"), edge("b", "label", "Reject")}, edges.Outcome{PreferredLabel: "reject"}, nil, "b"},
		{"step 2: accelerator stripped", []*graph.Edge{edge("a", "label", "[A] Approve"), edge("b", "label", "R) Reject")}, edges.Outcome{PreferredLabel: "  REJECT "}, nil, "b"},
		{"step 2: dash accelerator", []*graph.Edge{edge("a", "label", "Y - Yes"), edge("b", "label", "N - No")}, edges.Outcome{PreferredLabel: "yes"}, nil, "a"},
		{"step 2: unconditional only", []*graph.Edge{edge("a", "label", "go", "condition", "outcome=fail"), edge("b")}, edges.Outcome{Status: "success", PreferredLabel: "go"}, nil, "b"},
		{"step 3: suggested ids in order", []*graph.Edge{edge("a"), edge("b"), edge("c")}, edges.Outcome{SuggestedNextIDs: []string{"x", "c", "b"}}, nil, "c"},
		{"step 3: unconditional only", []*graph.Edge{edge("a", "condition", "outcome=fail"), edge("b", "weight", "1")}, edges.Outcome{Status: "success", SuggestedNextIDs: []string{"a"}}, nil, "b"},
		{"step 2 before step 3", []*graph.Edge{edge("a", "label", "x"), edge("b")}, edges.Outcome{PreferredLabel: "x", SuggestedNextIDs: []string{"b"}}, nil, "a"},
		{"step 4: weight", []*graph.Edge{edge("a", "weight", "1"), edge("b", "weight", "3"), edge("c", "weight", "2")}, edges.Outcome{}, nil, "b"},
		{"step 4: negative weight", []*graph.Edge{edge("a", "weight", "-1"), edge("b")}, edges.Outcome{}, nil, "b"},
		{"step 5: lexical", []*graph.Edge{edge("c"), edge("a"), edge("b")}, edges.Outcome{}, nil, "a"},
		{"step 5: after equal weights", []*graph.Edge{edge("c", "weight", "2"), edge("b", "weight", "2"), edge("a", "weight", "1")}, edges.Outcome{}, nil, "b"},
		{"no edges", nil, edges.Outcome{}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gr := g(t, tc.edges...)
			got := edges.Select(gr, "n", tc.o, tc.ctx)
			if tc.want == "" {
				require.Nil(t, got)
				return
			}
			require.NotNil(t, got)
			require.Equal(t, tc.want, got.To)
		})
	}
}

func TestBroadcast(t *testing.T) {
	gr := g(t, edge("a"), edge("b", "condition", "outcome=fail"), edge("c", "condition", "outcome=success"), edge("d"))
	var got []string
	for _, e := range edges.Broadcast(gr, "n", edges.Outcome{Status: "success"}, nil) {
		got = append(got, e.To)
	}
	require.Equal(t, []string{"a", "c", "d"}, got)
}

func TestEdgeID(t *testing.T) {
	require.Equal(t, "a.b", edges.EdgeID(&graph.Edge{From: "a", To: "b"}))
	require.Equal(t, "a.b.2", edges.EdgeID(&graph.Edge{From: "a", To: "b", Index: 2}))
}

func TestAccelerator(t *testing.T) {
	for _, tc := range []struct{ label, key, rest string }{
		{"[A] Approve", "A", "Approve"},
		{"A) Approve", "A", "Approve"},
		{"A - Approve", "A", "Approve"},
		{"Approve", "A", "Approve"},
		{"[Esc] Cancel", "Esc", "Cancel"},
		{"", "", ""},
	} {
		k, r := edges.Accelerator(tc.label)
		require.Equal(t, tc.key, k, tc.label)
		require.Equal(t, tc.rest, r, tc.label)
	}
	require.Equal(t, "approve", edges.NormalizeLabel(" [A] Approve "))
	require.Equal(t, "ship it", edges.NormalizeLabel("Ship It"))
}
