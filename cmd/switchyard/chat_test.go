package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/nodes/agent"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

// TestChat talks with an interactive node of a running session through
// `switchyard chat`, as an outside user over the listener: each line goes
// to the node's thread and its reply comes back; /done ends the
// conversation and the session goes on to its end.
func TestChat(t *testing.T) {
	b := brokertest.Start(t, brokertest.Listen("user-token", "admin-token"))
	mockFile := filepath.Join(t.TempDir(), "mock.json")
	require.NoError(t, os.WriteFile(mockFile, []byte(`{"pair": [
		{"response": "What should we build?"},
		{"response": "Added the --verbose flag."}]}`), 0o644))
	mock, err := agent.LoadMockFile(mockFile)
	require.NoError(t, err)
	g, diags := graph.Load("chat.dot", []byte(`digraph c { start [shape=Mdiamond]
		pair [prompt="Pair with me", mode=interactive]; exit [shape=Msquare]; start -> pair -> exit }`))
	require.False(t, diags.HasErrors(), "%v", diags)

	firstTurn := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	var prompts []string
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := session.Start(ctx, session.Config{ID: "chat1", Graph: g, Broker: b, LogsDir: t.TempDir(),
		Deps: nodes.Deps{Providers: func(string) (agent.Provider, error) {
			return recordPrompts(mock, func(p string) { mu.Lock(); prompts = append(prompts, p); mu.Unlock() }), nil
		}},
		Observer: func(ev *pb.Event) {
			if ev.Kind == "node.completed" && ev.Node == "pair" {
				once.Do(func() { close(firstTurn) })
			}
		}})
	require.NoError(t, err)
	defer s.Stop()
	<-firstTurn

	var out, errOut bytes.Buffer
	root := newRootCmd(&out, &errOut)
	root.SetIn(strings.NewReader("add a --verbose flag\n/done\n"))
	root.SetArgs([]string{"chat", "chat1", "pair", "--nats", b.ClientURL(), "--token", "user-token", "--wait", "30s"})
	require.NoError(t, root.ExecuteContext(ctx), "stderr: %s", errOut.String())
	require.Contains(t, out.String(), "Added the --verbose flag.")
	require.Contains(t, out.String(), "(the conversation is over: success)")

	rep, err := s.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status, rep.Reason)
	require.Equal(t, 3, rep.Node("pair").Visits, "first turn, the message, /done")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, prompts, 2, "/done does not run the agent")
	require.Contains(t, prompts[0], "Pair with me")
	require.Equal(t, "add a --verbose flag", prompts[1], "the message goes to the thread as typed")
}

// recordPrompts wraps a provider, reporting each prompt it gets.
func recordPrompts(p agent.Provider, f func(string)) agent.Provider {
	return promptRecorder{p, f}
}

type promptRecorder struct {
	agent.Provider
	f func(string)
}

func (r promptRecorder) Run(ctx context.Context, req *agent.Request, on func(agent.Event)) (*agent.Result, error) {
	r.f(req.Prompt)
	return r.Provider.Run(ctx, req, on)
}

// TestRunHoldsTheConversationOnItsInput: `switchyard run` talks with an
// interactive node on its own input; the end of the input ends it.
func TestRunHoldsTheConversationOnItsInput(t *testing.T) {
	dir := t.TempDir()
	dot := filepath.Join(dir, "pair.dot")
	require.NoError(t, os.WriteFile(dot, []byte(`digraph p { start [shape=Mdiamond]
		pair [prompt="Pair with me", mode=interactive]; exit [shape=Msquare]; start -> pair -> exit }`), 0o644))
	mockFile := filepath.Join(dir, "mock.json")
	require.NoError(t, os.WriteFile(mockFile, []byte(`{"pair": [
		{"response": "What should we build?"}, {"response": "Added the --verbose flag."}]}`), 0o644))

	var out, errOut bytes.Buffer
	root := newRootCmd(&out, &errOut)
	root.SetIn(strings.NewReader("add a --verbose flag\n"))
	root.SetArgs([]string{"run", dot, "--mock", mockFile, "--logs", t.TempDir(), "--data", t.TempDir()})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, root.ExecuteContext(ctx), "stderr: %s", errOut.String())
	log := errOut.String()
	require.Contains(t, log, "says: What should we build?")
	require.Contains(t, log, "pair> ")
	require.Contains(t, log, "says: Added the --verbose flag.")
	require.Regexp(t, `pair\s+success\s+3\s+3`, log, "first turn, the line, then /done at the end of the input")
}
