package graph

import (
	"strings"
)

// DOT prints the graph as canonical DOT: graph attributes, then nodes and
// edges in declaration order, every attribute explicit and sorted by key.
// The output parses back to an equal model (positions aside).
func (g *Graph) DOT() string {
	var b strings.Builder
	name := g.Name
	if name == "" {
		name = "G"
	}
	b.WriteString("digraph ")
	b.WriteString(printID(name))
	b.WriteString(" {\n")
	if len(g.Attrs) > 0 {
		b.WriteString("    graph ")
		writeAttrs(&b, g.Attrs)
		b.WriteString("\n")
	}
	for _, n := range g.Nodes {
		b.WriteString("    ")
		b.WriteString(n.ID)
		if len(n.Attrs) > 0 {
			b.WriteString(" ")
			writeAttrs(&b, n.Attrs)
		}
		b.WriteString("\n")
	}
	for _, sg := range g.Subgraphs {
		b.WriteString("    subgraph ")
		b.WriteString(printID(sg.ID))
		b.WriteString(" {")
		if len(sg.Attrs) > 0 {
			b.WriteString(" graph ")
			writeAttrs(&b, sg.Attrs)
		}
		for _, id := range sg.Nodes {
			b.WriteString(" ")
			b.WriteString(id)
		}
		b.WriteString(" }\n")
	}
	for _, e := range g.Edges {
		b.WriteString("    ")
		b.WriteString(e.From)
		b.WriteString(" -> ")
		b.WriteString(e.To)
		if len(e.Attrs) > 0 {
			b.WriteString(" ")
			writeAttrs(&b, e.Attrs)
		}
		b.WriteString("\n")
	}
	b.WriteString("}\n")
	return b.String()
}

func printID(s string) string {
	if IsIdentifier(s) {
		return s
	}
	return quote(s)
}

func writeAttrs(b *strings.Builder, a Attrs) {
	b.WriteString("[")
	for i, k := range a.Keys() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(k)
		b.WriteString("=")
		b.WriteString(printValue(a[k]))
	}
	b.WriteString("]")
}

// printValue writes a value so that it re-parses with the same text and kind.
func printValue(v Value) string {
	switch v.Kind {
	case KindInt:
		if intRE.MatchString(v.Text) {
			return v.Text
		}
	case KindFloat:
		if floatRE.MatchString(v.Text) {
			return v.Text
		}
	case KindBool:
		if v.Text == "true" || v.Text == "false" {
			return v.Text
		}
	case KindDuration:
		if durationRE.MatchString(v.Text) {
			return v.Text
		}
	case KindBare:
		if bareRE.MatchString(v.Text) && v.Text != "true" && v.Text != "false" {
			return v.Text
		}
	}
	return quote(v.Text)
}

// quote writes a DOT string with the escapes the parser reads.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		default:
			// other control characters are kept raw: DOT strings may hold them
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
