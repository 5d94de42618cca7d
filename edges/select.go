package edges

import (
	"sort"
	"strconv"
	"strings"

	"github.com/switchyard/switchyard/edges/cond"
	"github.com/switchyard/switchyard/graph"
)

// Outcome is what edge selection reads of a node's outcome.
type Outcome struct {
	Status           string
	PreferredLabel   string
	SuggestedNextIDs []string
}

// EdgeID names an edge in its subject: "from.to", or "from.to.N" for the
// N-th (N > 0) further edge joining the same pair.
func EdgeID(e *graph.Edge) string {
	id := e.From + "." + e.To
	if e.Index > 0 {
		id += "." + strconv.Itoa(e.Index)
	}
	return id
}

// compiled returns the edge's compiled condition; nil for an edge without
// one. An edge whose condition does not compile never matches (validation
// reports it before a run).
func compiled(e *graph.Edge) (c *cond.Expr, has bool, ok bool) {
	if e.Cond != nil {
		return e.Cond, true, true
	}
	src := e.Condition()
	if strings.TrimSpace(src) == "" {
		return nil, false, true
	}
	c, err := cond.Parse(src)
	return c, true, err == nil
}

// Select chooses the one edge a pipeline follows after a node (spec 3.3):
//  1. among edges whose condition holds: highest weight, then lowest target id;
//  2. the first unconditional edge whose label matches the preferred label
//     after normalisation;
//  3. for each suggested next id in order, the first unconditional edge to it;
//  4. the highest weight among unconditional edges;
//  5. then the lowest target id.
//
// It returns nil when no edge qualifies; edges whose condition is false are
// never a fallback.
func Select(g *graph.Graph, from string, o Outcome, ctx map[string]string) *graph.Edge {
	env := cond.Env{Outcome: o.Status, PreferredLabel: o.PreferredLabel, Context: ctx}
	var matched, plain []*graph.Edge
	for _, e := range g.Outgoing(from) {
		c, has, ok := compiled(e)
		switch {
		case !has:
			plain = append(plain, e)
		case ok && c.Eval(env):
			matched = append(matched, e)
		}
	}
	if len(matched) > 0 {
		return best(matched)
	}
	if o.PreferredLabel != "" {
		want := NormalizeLabel(o.PreferredLabel)
		for _, e := range plain {
			if NormalizeLabel(e.Label()) == want {
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
	if len(plain) > 0 {
		return best(plain)
	}
	return nil
}

// Broadcast returns every edge whose condition holds (edges without a
// condition always hold), in declaration order: the routing policy of
// parallel nodes and reactive sessions.
func Broadcast(g *graph.Graph, from string, o Outcome, ctx map[string]string) []*graph.Edge {
	env := cond.Env{Outcome: o.Status, PreferredLabel: o.PreferredLabel, Context: ctx}
	var out []*graph.Edge
	for _, e := range g.Outgoing(from) {
		c, _, ok := compiled(e)
		if ok && c.Eval(env) {
			out = append(out, e)
		}
	}
	return out
}

// best is the edge with the highest weight, then the lowest target id.
func best(es []*graph.Edge) *graph.Edge {
	out := append([]*graph.Edge(nil), es...)
	sort.SliceStable(out, func(i, j int) bool {
		if wi, wj := out[i].Weight(), out[j].Weight(); wi != wj {
			return wi > wj
		}
		return out[i].To < out[j].To
	})
	return out[0]
}
