package nodes_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/nodes/agent"
)

// replyScript is a provider that answers from a list and records requests.
type replyScript struct {
	mu      sync.Mutex
	replies []string
	reqs    []agent.Request
}

func (p *replyScript) Name() string { return "replyScript" }

func (p *replyScript) Run(_ context.Context, req *agent.Request, _ func(agent.Event)) (*agent.Result, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reqs = append(p.reqs, *req)
	text := p.replies[min(len(p.reqs), len(p.replies))-1]
	return &agent.Result{Text: text, Success: true, SessionID: "cli-1"}, nil
}

func (p *replyScript) last() agent.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reqs[len(p.reqs)-1]
}

func modeRegistry(t *testing.T, p *replyScript) *nodes.Registry {
	return registry(t, nodes.Deps{Providers: func(string) (agent.Provider, error) { return p, nil }})
}

type emitted struct {
	mu     sync.Mutex
	events []map[string]any
}

func (e *emitted) emit(kind string, f map[string]any) {
	if kind == "agent.reply" {
		e.mu.Lock()
		e.events = append(e.events, f)
		e.mu.Unlock()
	}
}

func TestAutoModeTicksUntilDone(t *testing.T) {
	g := load(t, `digraph g { start [shape=Mdiamond]; verify; fix [prompt="Fix the failing tests", mode=auto]; exit [shape=Msquare]
		start -> fix -> verify -> exit }`)
	p := &replyScript{replies: []string{"I changed parser.go", "all tests pass\nDONE"}}
	r := modeRegistry(t, p)

	in := input(t, g, "fix")
	o := handle(t, r, in)
	require.Equal(t, nodes.ContinueTick, o.Continue, "not done: it goes on")
	require.Contains(t, p.last().Prompt, "Fix the failing tests")
	require.Empty(t, p.last().ResumeSession)
	require.Equal(t, "cli-1", o.ContextUpdates[nodes.ThreadKeyPrefix+"fix"])

	// The tick: the thread, what arrived (an upstream verdict), changed files.
	require.NoError(t, exec.Command("git", "-C", in.WorkDir, "init", "-q").Run())
	require.NoError(t, os.WriteFile(filepath.Join(in.WorkDir, "parser.go"), []byte("package p\n"), 0o644))
	in2 := input(t, g, "fix")
	in2.WorkDir = in.WorkDir
	for k, v := range o.ContextUpdates {
		in2.Context[k] = v
	}
	in2.Messages = []nodes.Message{{Kind: "tick", From: "fix"}, {Kind: "handoff", From: "verify", Status: nodes.StatusFail, Response: "2 tests fail"}}
	o2 := handle(t, r, in2)
	req := p.last()
	require.Equal(t, "cli-1", req.ResumeSession, "the same thread")
	require.NotContains(t, req.Prompt, "Fix the failing tests", "a tick, not the first prompt again")
	require.Contains(t, req.Prompt, "verify finished with fail: 2 tests fail")
	require.Contains(t, req.Prompt, "parser.go")
	require.Contains(t, req.Prompt, "turn 2")
	require.Empty(t, o2.Continue, "DONE ends it")
	require.Equal(t, nodes.StatusSuccess, o2.Status)
}

func TestInteractiveModeConversation(t *testing.T) {
	g := load(t, `digraph g { start [shape=Mdiamond]; pair [prompt="Pair with me on the CLI", mode=interactive]; exit [shape=Msquare]
		start -> pair -> exit }`)
	p := &replyScript{replies: []string{"What should we build?", "Added the flag."}}
	r := modeRegistry(t, p)
	ev := &emitted{}

	in := input(t, g, "pair")
	in.Emit = ev.emit
	o := handle(t, r, in)
	require.Equal(t, nodes.ContinueWait, o.Continue)

	turn := func(id, text string) *nodes.Outcome {
		next := input(t, g, "pair")
		next.StageDir, next.Emit = in.StageDir, ev.emit
		next.Context[nodes.ThreadKeyPrefix+"pair"] = "cli-1" // as the engine finds it
		next.Messages = []nodes.Message{{ID: id, Kind: "event", Text: text}}
		return handle(t, r, next)
	}
	o = turn("m1", "add a --verbose flag")
	require.Equal(t, nodes.ContinueWait, o.Continue)
	require.Equal(t, "add a --verbose flag", p.last().Prompt, "a message goes to the thread as it is")
	require.Equal(t, "cli-1", p.last().ResumeSession)

	o = turn("m2", "/done")
	require.Empty(t, o.Continue, "the person ended it")
	require.Equal(t, nodes.StatusSuccess, o.Status)
	require.Equal(t, "Added the flag.", o.Response, "the last reply goes downstream")
	require.Len(t, p.reqs, 2, "/done does not run the agent")

	require.Len(t, ev.events, 2)
	require.Equal(t, "What should we build?", ev.events[0]["message"])
	require.Equal(t, "m1", ev.events[1]["in_reply_to"])
}

func TestSaysDone(t *testing.T) {
	for text, want := range map[string]bool{
		"DONE": true, "fixed it\nDONE\n": true, "DONE: all green": true, "  DONE.": true,
		"not done yet": false, "DONE-ish": false, "we are DONE here": false, "": false,
	} {
		require.Equal(t, want, nodes.SaysDone(text), "%q", text)
	}
}
