package nodes_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/nodes/agent"
)

func load(t testing.TB, src string) *graph.Graph {
	t.Helper()
	g, diags := graph.Load("t.dot", []byte(src))
	require.False(t, diags.HasErrors(), "%v", diags)
	return g
}

// input is the input of node, with fresh logs, stage and work directories.
func input(t *testing.T, g *graph.Graph, node string) *nodes.Input {
	t.Helper()
	dir := t.TempDir()
	n := g.Node(node)
	require.NotNil(t, n, node)
	return &nodes.Input{SessionID: "s1", Graph: g, Node: n, Type: g.HandlerType(n), Context: map[string]string{},
		Prompt: n.Prompt(), LogsDir: dir, StageDir: filepath.Join(dir, node), WorkDir: dir, Attempt: 1, AttemptID: "s1/" + node + "/1/1"}
}

func registry(t testing.TB, deps nodes.Deps) *nodes.Registry {
	t.Helper()
	r := nodes.NewRegistry()
	require.NoError(t, nodes.RegisterBuiltins(r, deps))
	return r
}

func handle(t *testing.T, r *nodes.Registry, in *nodes.Input) *nodes.Outcome {
	t.Helper()
	h, ok := r.Lookup(in.Type)
	require.True(t, ok, in.Type)
	o, err := h.Handle(context.Background(), in)
	require.NoError(t, err)
	require.NotNil(t, o)
	return o
}

// providers serves one provider under every name, recording the names asked.
func providers(p agent.Provider, asked *[]string) func(string) (agent.Provider, error) {
	var mu sync.Mutex
	return func(name string) (agent.Provider, error) {
		if asked != nil {
			mu.Lock()
			*asked = append(*asked, name)
			mu.Unlock()
		}
		return p, nil
	}
}

// scripted is a provider whose run is a function; it records the requests.
type scripted struct {
	mu   sync.Mutex
	reqs []*agent.Request
	run  func(req *agent.Request, onEvent func(agent.Event)) (*agent.Result, error)
}

func (s *scripted) Name() string { return "scripted" }
func (s *scripted) Run(_ context.Context, req *agent.Request, onEvent func(agent.Event)) (*agent.Result, error) {
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()
	return s.run(req, onEvent)
}

func (s *scripted) last() *agent.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reqs[len(s.reqs)-1]
}

func answering(res *agent.Result, err error) *scripted {
	return &scripted{run: func(*agent.Request, func(agent.Event)) (*agent.Result, error) { return res, err }}
}

// loadLoose loads a graph whatever its diagnostics say: handlers must
// cope with attributes validation would refuse.
func loadLoose(t testing.TB, src string) (*graph.Graph, graph.Diagnostics) {
	t.Helper()
	g, diags := graph.Load("t.dot", []byte(src))
	require.NotNil(t, g, "%v", diags)
	return g, diags
}
