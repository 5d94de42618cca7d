package edges_test

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/edges"
	"github.com/switchyard/switchyard/edges/cond"
	"github.com/switchyard/switchyard/graph"
)

// fromN builds a graph whose edges leave node "n" (unless they name another
// source), with Index set as graph.Load sets it and conditions compiled.
func fromN(t testing.TB, es ...*graph.Edge) *graph.Graph {
	t.Helper()
	gr := &graph.Graph{Name: "t", Attrs: graph.Attrs{}}
	seen := map[string]bool{}
	node := func(id string) {
		if !seen[id] {
			seen[id] = true
			gr.Nodes = append(gr.Nodes, &graph.Node{ID: id, Attrs: graph.Attrs{}})
		}
	}
	pairs := map[[2]string]int{}
	for _, e := range es {
		if e.From == "" {
			e.From = "n"
		}
		node(e.From)
		node(e.To)
		p := [2]string{e.From, e.To}
		e.Index = pairs[p]
		pairs[p]++
		if src := e.Condition(); src != "" && e.Cond == nil {
			c, err := cond.Parse(src)
			if err == nil {
				e.Cond = c
			}
		}
		gr.Edges = append(gr.Edges, e)
	}
	return gr
}

// edge makes an edge to `to` with attributes given as key, value pairs.
func edge(to string, kv ...string) *graph.Edge {
	e := &graph.Edge{To: to, Attrs: graph.Attrs{}}
	for i := 0; i+1 < len(kv); i += 2 {
		e.Attrs.Set(kv[i], kv[i+1])
	}
	return e
}

// raw marks an edge whose condition TestSelect leaves uncompiled, as in a
// graph built by hand without graph.Load.
func raw(e *graph.Edge) *graph.Edge { e.Attrs.Set("uncompiled", "true"); return e }

// status is an outcome with only a status.
func status(s string) edges.Outcome { return edges.Outcome{Status: s} }

func TestSelect(t *testing.T) {
	other := edge("z")
	other.From = "elsewhere"
	for _, tc := range []struct {
		name  string
		edges []*graph.Edge
		o     edges.Outcome
		ctx   map[string]string
		want  string // "to" or "to#index"; "" for nil
	}{
		// step 1: conditions
		{"1: condition holds", []*graph.Edge{edge("a"), edge("b", "condition", "outcome=success")}, status("success"), nil, "b"},
		{"1: status case-insensitive", []*graph.Edge{edge("a"), edge("b", "condition", "outcome=success")}, status("SUCCESS"), nil, "b"},
		{"1: beats weight", []*graph.Edge{edge("a", "weight", "100"), edge("b", "condition", "outcome=success")}, status("success"), nil, "b"},
		{"1: beats preferred label", []*graph.Edge{edge("a", "label", "go"), edge("b", "condition", "outcome=success")}, edges.Outcome{Status: "success", PreferredLabel: "go"}, nil, "b"},
		{"1: beats suggested ids", []*graph.Edge{edge("a"), edge("b", "condition", "outcome=success")}, edges.Outcome{Status: "success", SuggestedNextIDs: []string{"a"}}, nil, "b"},
		{"1: highest weight", []*graph.Edge{edge("a", "condition", "outcome=success", "weight", "1"), edge("b", "condition", "outcome=success", "weight", "2"), edge("c", "condition", "outcome=success")}, status("success"), nil, "b"},
		{"1: tie by target id", []*graph.Edge{edge("z", "condition", "outcome=success"), edge("m", "condition", "outcome=success"), edge("q", "condition", "outcome=success")}, status("success"), nil, "m"},
		{"1: equal weight ties by target id", []*graph.Edge{edge("z", "condition", "outcome=success", "weight", "5"), edge("m", "condition", "outcome=success", "weight", "5"), edge("a", "condition", "outcome=success", "weight", "4")}, status("success"), nil, "m"},
		{"1: same target: first declared", []*graph.Edge{edge("a", "condition", "outcome=success"), edge("a", "condition", "context.k=v")}, status("success"), map[string]string{"k": "v"}, "a#0"},
		{"1: same target, heavier later", []*graph.Edge{edge("a", "condition", "outcome=success"), edge("a", "condition", "context.k=v", "weight", "1")}, status("success"), map[string]string{"k": "v"}, "a#1"},
		{"1: only holding conditions count", []*graph.Edge{edge("a", "condition", "outcome=fail", "weight", "9"), edge("b", "condition", "outcome=success")}, status("success"), nil, "b"},
		{"1: context", []*graph.Edge{edge("a", "condition", "context.k=v"), edge("b")}, edges.Outcome{}, map[string]string{"k": "v"}, "a"},
		{"1: uncompiled condition is compiled", []*graph.Edge{edge("a"), raw(edge("b", "condition", "outcome=success"))}, status("success"), nil, "b"},
		{"1: custom status", []*graph.Edge{edge("a"), edge("b", "condition", "outcome=needs_dod")}, status("needs_dod"), nil, "b"},
		// no fallback to false conditions
		{"false condition is no fallback", []*graph.Edge{edge("a", "condition", "outcome=fail")}, status("success"), nil, ""},
		{"false condition is no label fallback", []*graph.Edge{edge("a", "condition", "outcome=fail", "label", "go")}, edges.Outcome{Status: "success", PreferredLabel: "go"}, nil, ""},
		{"false condition is no suggestion fallback", []*graph.Edge{edge("a", "condition", "outcome=fail")}, edges.Outcome{Status: "success", SuggestedNextIDs: []string{"a"}}, nil, ""},
		{"malformed condition never holds", []*graph.Edge{raw(edge("a", "condition", "outcome==success"))}, status("success"), nil, ""},
		{"malformed condition is not unconditional", []*graph.Edge{raw(edge("a", "condition", "outcome==success")), edge("b", "weight", "-5")}, status("success"), nil, "b"},
		{"blank condition is unconditional", []*graph.Edge{edge("b", "condition", "  "), edge("a", "condition", "outcome=fail")}, status("success"), nil, "b"},
		// step 2: preferred label over unconditional edges
		{"2: preferred label", []*graph.Edge{edge("a", "label", "Approve"), edge("b", "label", "Reject")}, edges.Outcome{PreferredLabel: "reject"}, nil, "b"},
		{"2: beats weight", []*graph.Edge{edge("a", "label", "Approve", "weight", "9"), edge("b", "label", "Reject")}, edges.Outcome{PreferredLabel: "Reject"}, nil, "b"},
		{"2: trimmed, any case", []*graph.Edge{edge("a", "label", "Approve"), edge("b", "label", " Ship It ")}, edges.Outcome{PreferredLabel: "  SHIP it "}, nil, "b"},
		{"2: [K] stripped", []*graph.Edge{edge("a", "label", "[A] Approve"), edge("b", "label", "[R] Reject")}, edges.Outcome{PreferredLabel: "reject"}, nil, "b"},
		{"2: K) stripped", []*graph.Edge{edge("a", "label", "A) Approve"), edge("b", "label", "R) Reject")}, edges.Outcome{PreferredLabel: "Reject"}, nil, "b"},
		{"2: K - stripped", []*graph.Edge{edge("a", "label", "Y - Yes"), edge("b", "label", "N - No")}, edges.Outcome{PreferredLabel: "yes"}, nil, "a"},
		{"2: preferred label with accelerator", []*graph.Edge{edge("a", "label", "Approve"), edge("b", "label", "Reject")}, edges.Outcome{PreferredLabel: "[R] Reject"}, nil, "b"},
		{"2: unconditional only", []*graph.Edge{edge("a", "label", "go", "condition", "outcome=fail"), edge("b")}, edges.Outcome{Status: "success", PreferredLabel: "go"}, nil, "b"},
		{"2: first declared among matches", []*graph.Edge{edge("z", "label", "go"), edge("a", "label", "Go", "weight", "3")}, edges.Outcome{PreferredLabel: "go"}, nil, "z"},
		{"2: no match falls through", []*graph.Edge{edge("a", "label", "x"), edge("b", "weight", "1")}, edges.Outcome{PreferredLabel: "y"}, nil, "b"},
		{"2: blank label matches no unlabelled edge", []*graph.Edge{edge("b"), edge("a", "label", "x", "weight", "-1")}, edges.Outcome{PreferredLabel: "  "}, nil, "b"},
		{"2: no substring match", []*graph.Edge{edge("a", "label", "approve all"), edge("b")}, edges.Outcome{PreferredLabel: "approve"}, nil, "a"},
		{"2 before 3", []*graph.Edge{edge("a", "label", "x"), edge("b")}, edges.Outcome{PreferredLabel: "x", SuggestedNextIDs: []string{"b"}}, nil, "a"},
		// step 3: suggested next ids over unconditional edges
		{"3: suggested ids in order", []*graph.Edge{edge("a"), edge("b"), edge("c")}, edges.Outcome{SuggestedNextIDs: []string{"x", "c", "b"}}, nil, "c"},
		{"3: order of ids, not of edges", []*graph.Edge{edge("b"), edge("c")}, edges.Outcome{SuggestedNextIDs: []string{"c", "b"}}, nil, "c"},
		{"3: beats weight", []*graph.Edge{edge("a", "weight", "9"), edge("b")}, edges.Outcome{SuggestedNextIDs: []string{"b"}}, nil, "b"},
		{"3: unconditional only", []*graph.Edge{edge("a", "condition", "outcome=fail"), edge("b", "weight", "1"), edge("c")}, edges.Outcome{Status: "success", SuggestedNextIDs: []string{"a"}}, nil, "b"},
		{"3: first declared edge to the id", []*graph.Edge{edge("a"), edge("a", "weight", "2")}, edges.Outcome{SuggestedNextIDs: []string{"a"}}, nil, "a#0"},
		{"3: ids are exact", []*graph.Edge{edge("A"), edge("b", "weight", "1")}, edges.Outcome{SuggestedNextIDs: []string{"a"}}, nil, "b"},
		{"3: unknown ids fall through", []*graph.Edge{edge("a"), edge("b", "weight", "1")}, edges.Outcome{SuggestedNextIDs: []string{"x", "y"}}, nil, "b"},
		// step 4: weight
		{"4: highest weight", []*graph.Edge{edge("a", "weight", "1"), edge("b", "weight", "3"), edge("c", "weight", "2")}, edges.Outcome{}, nil, "b"},
		{"4: negative weight loses to default 0", []*graph.Edge{edge("a", "weight", "-1"), edge("b")}, edges.Outcome{}, nil, "b"},
		{"4: malformed weight is 0", []*graph.Edge{edge("a", "weight", "heavy"), edge("b", "weight", "1")}, edges.Outcome{}, nil, "b"},
		// step 5: lexical
		{"5: lexical", []*graph.Edge{edge("c"), edge("a"), edge("b")}, edges.Outcome{}, nil, "a"},
		{"5: after equal weights", []*graph.Edge{edge("c", "weight", "2"), edge("b", "weight", "2"), edge("a", "weight", "1")}, edges.Outcome{}, nil, "b"},
		{"5: byte order (upper case first)", []*graph.Edge{edge("b"), edge("B")}, edges.Outcome{}, nil, "B"},
		{"5: same target: first declared", []*graph.Edge{edge("a", "label", "one"), edge("a", "label", "two")}, edges.Outcome{}, nil, "a#0"},
		// nothing
		{"no edges", nil, edges.Outcome{}, nil, ""},
		{"edges of other nodes are ignored", []*graph.Edge{other}, edges.Outcome{}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gr := fromN(t, tc.edges...)
			for _, e := range gr.Edges {
				if e.Attrs.Bool("uncompiled") {
					e.Cond = nil
				}
			}
			got := edges.Select(gr, "n", tc.o, tc.ctx)
			if tc.want == "" {
				require.Nil(t, got)
				return
			}
			require.NotNil(t, got)
			to, idx, _ := strings.Cut(tc.want, "#")
			require.Equal(t, to, got.To)
			if idx != "" {
				require.Equal(t, idx, fmt.Sprint(got.Index))
			}
		})
	}
}

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edges []*graph.Edge
		o     edges.Outcome
		want  string
	}{
		{"only conditions", []*graph.Edge{edge("a"), edge("b", "label", "x")}, edges.Outcome{Status: "fail", PreferredLabel: "x"}, ""},
		{"the failure edge", []*graph.Edge{edge("a"), edge("b", "condition", "outcome=fail")}, status("fail"), "b"},
		{"weight then target", []*graph.Edge{edge("c", "condition", "outcome=fail"), edge("b", "condition", "outcome!=success"), edge("d", "condition", "outcome=fail", "weight", "-1")}, status("fail"), "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := edges.Match(fromN(t, tc.edges...), "n", tc.o, nil)
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
	other := edge("e")
	other.From = "elsewhere"
	gr := fromN(t, edge("d"), edge("b", "condition", "outcome=fail"), edge("c", "condition", "outcome=success"),
		other, edge("a", "weight", "9"), raw(edge("f", "condition", "outcome=success")), raw(edge("g", "condition", "outcome=")))
	gr.Edges[5].Cond, gr.Edges[6].Cond = nil, nil
	for _, tc := range []struct {
		status string
		want   []string
	}{
		{"success", []string{"d", "c", "a", "f"}}, // declaration order, not weight or id
		{"fail", []string{"d", "b", "a"}},
		{"", []string{"d", "a", "g"}},
	} {
		t.Run(tc.status, func(t *testing.T) {
			var got []string
			for _, e := range edges.Broadcast(gr, "n", status(tc.status), nil) {
				got = append(got, e.To)
			}
			require.Equal(t, tc.want, got)
		})
	}
	require.Empty(t, edges.Broadcast(gr, "nobody", status("success"), nil))
}

func TestHoldsAndUnconditional(t *testing.T) {
	plain, condEdge, blank, bad := edge("a"), edge("b", "condition", "context.go"), edge("c", "condition", " "), edge("d", "condition", "a==b")
	require.True(t, edges.Unconditional(plain))
	require.True(t, edges.Unconditional(blank))
	require.False(t, edges.Unconditional(condEdge))
	require.False(t, edges.Unconditional(bad))
	require.True(t, edges.Holds(plain, edges.Outcome{}, nil))
	require.True(t, edges.Holds(condEdge, edges.Outcome{}, map[string]string{"go": "yes"}))
	require.False(t, edges.Holds(condEdge, edges.Outcome{}, map[string]string{"go": "0"}))
	require.False(t, edges.Holds(bad, edges.Outcome{}, nil))
}

func TestEdgeID(t *testing.T) {
	for _, tc := range []struct {
		e    graph.Edge
		want string
	}{
		{graph.Edge{From: "a", To: "b"}, "a.b"},
		{graph.Edge{From: "a", To: "b", Index: 1}, "a.b.1"},
		{graph.Edge{From: "a", To: "b", Index: 12}, "a.b.12"},
		{graph.Edge{From: "plan_2", To: "Review"}, "plan_2.Review"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			require.Equal(t, tc.want, edges.EdgeID(&tc.e))
		})
	}
}

func TestSelectDoesNotAllocate(t *testing.T) {
	gr := fromN(t, edge("a", "condition", "outcome=fail"), edge("b", "label", "[Y] Yes"), edge("c", "weight", "2"), edge("d"))
	o := edges.Outcome{Status: "success", PreferredLabel: "no", SuggestedNextIDs: []string{"x"}}
	ctx := map[string]string{"k": "v"}
	allocs := testing.AllocsPerRun(100, func() {
		if e := edges.Select(gr, "n", o, ctx); e == nil || e.To != "c" {
			t.Fatalf("Select = %v", e)
		}
	})
	require.Zero(t, allocs)
}

// reference is spec 3.3 written the long way: filter, sort, take the first.
func reference(gr *graph.Graph, from string, o edges.Outcome, ctx map[string]string) *graph.Edge {
	var out []*graph.Edge
	for _, e := range gr.Edges {
		if e.From == from {
			out = append(out, e)
		}
	}
	bestOf := func(es []*graph.Edge) *graph.Edge {
		if len(es) == 0 {
			return nil
		}
		es = append([]*graph.Edge(nil), es...)
		sort.SliceStable(es, func(i, j int) bool {
			if es[i].Weight() != es[j].Weight() {
				return es[i].Weight() > es[j].Weight()
			}
			return es[i].To < es[j].To
		})
		return es[0]
	}
	env := cond.Env{Outcome: o.Status, PreferredLabel: o.PreferredLabel, Context: ctx}
	var holding, plain []*graph.Edge
	for _, e := range out {
		if e.Condition() == "" {
			plain = append(plain, e)
		} else if e.Cond.Eval(env) {
			holding = append(holding, e)
		}
	}
	if e := bestOf(holding); e != nil {
		return e
	}
	if n := edges.NormalizeLabel(o.PreferredLabel); n != "" {
		for _, e := range plain {
			if edges.NormalizeLabel(e.Label()) == n {
				return e
			}
		}
	}
	for _, id := range o.SuggestedNextIDs {
		for _, e := range plain {
			if e.To == id {
				return e
			}
		}
	}
	return bestOf(plain)
}

// TestSelectMatchesReference compares Select with the reference on random
// fan-outs: targets, weights, labels, conditions and outcomes drawn from
// small sets so that every step and tie occurs often.
func TestSelectMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	for i := 0; i < 3000; i++ {
		var es []*graph.Edge
		for k := r.IntN(6); k > 0; k-- {
			e := edge(pick("a", "b", "c", "d"))
			if w := pick("", "", "1", "2", "-1"); w != "" {
				e.Attrs.Set("weight", w)
			}
			if l := pick("", "", "Yes", "[N] No", "maybe"); l != "" {
				e.Attrs.Set("label", l)
			}
			if c := pick("", "", "outcome=success", "outcome!=success", "context.k=v", "outcome=fail && context.k"); c != "" {
				e.Attrs.Set("condition", c)
			}
			es = append(es, e)
		}
		gr := fromN(t, es...)
		o := edges.Outcome{Status: pick("success", "fail", "FAIL"), PreferredLabel: pick("", "yes", "no", "N) no", "x")}
		for k := r.IntN(3); k > 0; k-- {
			o.SuggestedNextIDs = append(o.SuggestedNextIDs, pick("a", "b", "c", "d", "x"))
		}
		ctx := map[string]string{"k": pick("v", "", "w")}
		want, got := reference(gr, "n", o, ctx), edges.Select(gr, "n", o, ctx)
		require.Same(t, want, got, "case %d: outcome %+v ctx %v", i, o, ctx)
	}
}

func BenchmarkSelect(b *testing.B) {
	gr := fromN(b, edge("a", "condition", "outcome=fail"), edge("b", "condition", "outcome=success && context.k=v"),
		edge("c", "label", "[Y] Yes"), edge("d", "weight", "2"))
	o := edges.Outcome{Status: "success", PreferredLabel: "yes"}
	ctx := map[string]string{"k": "v"}
	b.ReportAllocs()
	for b.Loop() {
		edges.Select(gr, "n", o, ctx)
	}
}
