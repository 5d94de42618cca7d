package edges

import (
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

// env is the condition environment of an outcome and a run context.
func (o Outcome) env(ctx map[string]string) cond.Env {
	return cond.Env{Outcome: o.Status, PreferredLabel: o.PreferredLabel, Context: ctx}
}

// EdgeID names an edge in its subject: "from.to", or "from.to.N" for the
// N-th (N > 0) further edge joining the same pair.
func EdgeID(e *graph.Edge) string {
	if e.Index > 0 {
		return e.From + "." + e.To + "." + strconv.Itoa(e.Index)
	}
	return e.From + "." + e.To
}

// condition returns the edge's compiled condition. has is false for an
// edge without one (an unconditional edge); ok is false when the condition
// does not compile (validation reports it before a run), and such an edge
// never holds. Edge.Cond is used when set (graph.Load compiles it);
// otherwise the condition attribute is compiled on the spot.
func condition(e *graph.Edge) (c *cond.Expr, has, ok bool) {
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

// Unconditional reports whether e has no condition (or a blank one).
func Unconditional(e *graph.Edge) bool {
	_, has, _ := condition(e)
	return !has
}

// Holds reports whether e's condition holds for the outcome in the run
// context. An unconditional edge always holds; a malformed condition never
// does.
func Holds(e *graph.Edge, o Outcome, ctx map[string]string) bool {
	c, _, ok := condition(e)
	return ok && c.Eval(o.env(ctx))
}

// better reports whether e beats cur: a higher weight, then a lower target
// id. Ties keep cur, so the first edge declared wins among equals.
func better(e, cur *graph.Edge) bool {
	if cur == nil {
		return true
	}
	if we, wc := e.Weight(), cur.Weight(); we != wc {
		return we > wc
	}
	return e.To < cur.To
}

// Match is step 1 of Select alone: among the edges out of from whose
// condition holds, the highest weight, then the lowest target id; nil when
// none holds. Unconditional edges take no part. Failure routing uses it:
// a failed node follows only an edge that names the failure.
func Match(g *graph.Graph, from string, o Outcome, ctx map[string]string) *graph.Edge {
	env := o.env(ctx)
	var best *graph.Edge
	for _, e := range g.OutEdges(from) {
		if e.From != from {
			continue
		}
		if c, has, ok := condition(e); has && ok && c.Eval(env) && better(e, best) {
			best = e
		}
	}
	return best
}

// Select chooses the one edge a pipeline follows after a node (spec 3.3):
//
//  1. among edges whose condition holds: the highest weight, then the
//     lowest target id;
//  2. else, when the outcome has a preferred label, the first
//     unconditional edge whose label matches it after normalisation
//     (NormalizeLabel);
//  3. else, for each suggested next id in order, the first unconditional
//     edge to it;
//  4. else the highest weight among unconditional edges,
//  5. then the lowest target id.
//
// It returns nil when no edge qualifies: an edge whose condition is false
// is never a fallback. Among edges equal on every rule, the first declared
// wins. Select does not allocate when the graph's conditions are compiled.
func Select(g *graph.Graph, from string, o Outcome, ctx map[string]string) *graph.Edge {
	env := o.env(ctx)
	want := labelKey(o.PreferredLabel)
	var matched, labelled, suggested, plain *graph.Edge
	rank := len(o.SuggestedNextIDs) // position of suggested's target in SuggestedNextIDs
	for _, e := range g.OutEdges(from) {
		if e.From != from {
			continue
		}
		c, has, ok := condition(e)
		if has {
			if ok && c.Eval(env) && better(e, matched) {
				matched = e
			}
			continue
		}
		if labelled == nil && want != "" && strings.EqualFold(labelKey(e.Label()), want) {
			labelled = e
		}
		for i := 0; i < rank; i++ {
			if o.SuggestedNextIDs[i] == e.To {
				suggested, rank = e, i
				break
			}
		}
		if better(e, plain) {
			plain = e
		}
	}
	switch {
	case matched != nil:
		return matched
	case labelled != nil:
		return labelled
	case suggested != nil:
		return suggested
	}
	return plain
}

// Broadcast returns every edge out of from whose condition holds
// (unconditional edges always hold), in declaration order: the routing
// policy of parallel nodes and reactive sessions.
func Broadcast(g *graph.Graph, from string, o Outcome, ctx map[string]string) []*graph.Edge {
	env := o.env(ctx)
	var out []*graph.Edge
	for _, e := range g.OutEdges(from) {
		if e.From != from {
			continue
		}
		if c, _, ok := condition(e); ok && c.Eval(env) {
			out = append(out, e)
		}
	}
	return out
}
