package web

import (
	"strings"

	"github.com/switchyard/switchyard/edges"
	"github.com/switchyard/switchyard/graph"
)

// displayDOT writes g as the DOT the page lays out: every node with its
// shape and label and the SVG id node_<id>, every edge with its label (or
// condition) and the SVG id edge_<edge id>. Attribute values are quoted
// and escaped, so nothing of the graph's text is read as DOT syntax.
func displayDOT(g *graph.Graph) string {
	var b strings.Builder
	b.WriteString("digraph G {\n")
	b.WriteString("  graph [bgcolor=\"transparent\", fontname=\"Helvetica\", nodesep=0.4, ranksep=0.5];\n")
	b.WriteString("  node [fontname=\"Helvetica\", fontsize=12, style=\"filled\", fillcolor=\"#ffffff\", color=\"#4b5563\", penwidth=1.4];\n")
	b.WriteString("  edge [fontname=\"Helvetica\", fontsize=10, color=\"#6b7280\", fontcolor=\"#374151\"];\n")
	for _, n := range g.Nodes {
		b.WriteString("  ")
		b.WriteString(quote(n.ID))
		b.WriteString(" [id=")
		b.WriteString(quote("node_" + n.ID))
		b.WriteString(", shape=")
		b.WriteString(quote(n.Shape()))
		b.WriteString(", label=")
		b.WriteString(quote(clip(n.Label(), 60)))
		b.WriteString("];\n")
	}
	for _, e := range g.Edges {
		label := e.Attrs.String("label")
		if label == "" {
			label = e.Attrs.String("condition")
		}
		b.WriteString("  ")
		b.WriteString(quote(e.From))
		b.WriteString(" -> ")
		b.WriteString(quote(e.To))
		b.WriteString(" [id=")
		b.WriteString(quote("edge_" + edges.EdgeID(e)))
		if label != "" {
			b.WriteString(", label=")
			b.WriteString(quote(clip(label, 40)))
		}
		b.WriteString("];\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// quote makes s a DOT double-quoted string whose text is s itself: quotes
// and backslashes are escaped (no \n, \l or \N escapes survive), line
// breaks become spaces.
func quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '\n', '\r', '\t':
			b.WriteByte(' ')
		default:
			if r < 0x20 {
				continue
			}
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// clip shortens s to n runes with an ellipsis.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
