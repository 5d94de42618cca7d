package web

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph"
)

// Whatever a graph's text holds, the display DOT quotes it: it cannot end
// a string, add attributes or statements, or smuggle a label escape.
func TestDisplayDOTQuotes(t *testing.T) {
	require.Equal(t, `"plain"`, quote("plain"))
	require.Equal(t, `"a\" ]; x [label=\"pwn"`, quote(`a" ]; x [label="pwn`))
	require.Equal(t, `"back\\slash \\N"`, quote(`back\slash \N`))
	require.Equal(t, `"two lines"`, quote("two\nlines"))
	require.Equal(t, `"bell"`, quote("be\x07ll"))

	g, diags := graph.Load("t.dot", []byte(`digraph g { a [label="x\" URL=\"javascript:alert(1)", shape="box\" penwidth=99"]; b; a -> b [label="go"] }`), graph.AsSession())
	require.False(t, diags.HasErrors(), "%v", diags)
	dot := displayDOT(g)
	require.Contains(t, dot, `"a" [id="node_a", shape="box\" penwidth=99", label="x\" URL=\"javascript:alert(1)"];`)
	require.Contains(t, dot, `"a" -> "b" [id="edge_a.b", label="go"];`)
}
