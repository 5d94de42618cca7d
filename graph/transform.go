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
				v.raw = ""
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

// offsetPos is the position of byte offset off inside a value's text.
// A quoted value starts one column after its quote, and escapes count as
// written (\" is two columns), so the position points at the source.
func offsetPos(v Value, off int) Pos {
	p := v.Pos
	if !p.IsValid() {
		return p
	}
	off = max(0, min(off, len(v.Text)))
	src := v.Text[:off]
	if v.Kind == KindString {
		p.Col++
		if v.raw != "" && unescape(v.raw) == v.Text {
			src = v.raw[:rawOffset(v.raw, off)]
		}
	}
	for _, r := range src {
		if r == '\n' {
			p.Line++
			p.Col = 1
		} else {
			p.Col++
		}
	}
	return p
}

// unescape decodes a string's source as the lexer does.
func unescape(raw string) string {
	var b strings.Builder
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' || i+1 == len(raw) {
			b.WriteByte(raw[i])
			continue
		}
		i++
		switch raw[i] {
		case 'n', 'l', 'r':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case '\n':
		default:
			b.WriteByte(raw[i])
		}
	}
	return b.String()
}

// rawOffset maps a byte offset in the decoded string to one in its source.
func rawOffset(raw string, off int) int {
	i, d := 0, 0
	for i < len(raw) && d < off {
		if raw[i] == '\\' && i+1 < len(raw) {
			if raw[i+1] != '\n' {
				d++
			}
			i += 2
			continue
		}
		i++
		d++
	}
	return i
}
