package graph

import "strings"

// Transform changes a graph between parsing and validation (spec section
// 9). Transforms run in order: the built-ins ($goal expansion, then the
// model stylesheet), then custom ones in registration order.
type Transform interface {
	Name() string
	Apply(g *Graph) Diagnostics
}

// TransformFunc adapts a function to Transform.
type TransformFunc struct {
	N string
	F func(g *Graph) Diagnostics
}

// Name returns N.
func (t TransformFunc) Name() string { return t.N }

// Apply calls F.
func (t TransformFunc) Apply(g *Graph) Diagnostics { return t.F(g) }

// GoalExpansion replaces $goal in every prompt (and in labels used as
// prompts) with the graph's goal.
var GoalExpansion Transform = TransformFunc{N: "goal_expansion", F: func(g *Graph) Diagnostics {
	goal := g.Goal()
	for _, n := range g.Nodes {
		for _, k := range []string{"prompt", "label"} {
			if v, ok := n.Attrs[k]; ok && strings.Contains(v.Text, "$goal") {
				v.Text = strings.ReplaceAll(v.Text, "$goal", goal)
				n.Attrs[k] = v
			}
		}
	}
	return nil
}}

// Stylesheet applies the graph's model_stylesheet. A malformed stylesheet
// is left to the stylesheet_syntax rule, which reports it with its position.
var Stylesheet Transform = TransformFunc{N: "stylesheet", F: func(g *Graph) Diagnostics {
	v, ok := g.Attrs["model_stylesheet"]
	if !ok || strings.TrimSpace(v.Text) == "" {
		return nil
	}
	if rules, err := ParseStylesheet(v.Text); err == nil {
		ApplyStylesheet(g, rules)
	}
	return nil
}}

// offsetPos is the position of byte offset off inside a value's text
// (quoted values start one column after their quote).
func offsetPos(v Value, off int) Pos {
	p := v.Pos
	if !p.IsValid() {
		return p
	}
	if v.Kind == KindString {
		p.Col++
	}
	if off > len(v.Text) {
		off = len(v.Text)
	}
	for _, r := range v.Text[:off] {
		if r == '\n' {
			p.Line++
			p.Col = 1
		} else {
			p.Col++
		}
	}
	return p
}
