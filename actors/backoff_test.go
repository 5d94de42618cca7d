package actors

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph"
)

func TestRetryPresets(t *testing.T) {
	for _, tc := range []struct {
		name   string
		delays []time.Duration
	}{
		{"standard", []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond}},
		{"aggressive", []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second}},
		{"linear", []time.Duration{500 * time.Millisecond, 500 * time.Millisecond}},
		{"patient", []time.Duration{2 * time.Second, 6 * time.Second}},
	} {
		p := RetryPolicies[tc.name]
		require.Equal(t, len(tc.delays)+1, p.Attempts, tc.name)
		for i, want := range tc.delays {
			require.Equal(t, want, p.Delay(i+1), "%s retry %d", tc.name, i+1)
		}
	}
	require.Equal(t, time.Minute, RetryPolicies["standard"].Delay(30), "capped at 60s")
	require.Equal(t, 1, RetryPolicies["none"].Attempts)
}

func TestNodeRetryPolicy(t *testing.T) {
	g, _ := graph.Load("t.dot", []byte(`digraph t { default_max_retries=1; start [shape=Mdiamond]
		a [retry_policy=patient]; b [retry_policy=linear, max_retries=7]; c; exit [shape=Msquare]; start -> a -> b -> c -> exit }`))
	for node, want := range map[string]int{"a": 2, "b": 7, "c": 1} {
		n, delay := retryPolicy(g, g.Node(node))
		require.Equal(t, want, n, node)
		d := delay(1)
		require.True(t, d > 0 && d < 3*time.Second, "%s: %v", node, d)
	}
}

// TestRetryDefaultsAgreeWithDocs: a node that names no retry policy and
// no max_retries runs once (the spec's default_max_retries 0), and the
// attribute table and the reference say so.
func TestRetryDefaultsAgreeWithDocs(t *testing.T) {
	g, _ := graph.Load("t.dot", []byte(`digraph t { start [shape=Mdiamond]; a; exit [shape=Msquare]; start -> a -> exit }`))
	n, _ := retryPolicy(g, g.Node("a"))
	require.Equal(t, 0, n, "no retries unless the graph or node asks")
	for _, a := range graph.Attributes() {
		if a.Key == "retry_policy" {
			require.Empty(t, a.Default, "retry_policy has no default preset")
		}
	}
	doc, err := os.ReadFile("../docs/dot-reference.md")
	require.NoError(t, err)
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "| `retry_policy` |") {
			require.NotContains(t, line, "| `standard` |", "the reference gives standard (5 runs) as the default")
			require.Contains(t, line, "default_max_retries")
		}
	}
}
