package agent_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/nodes/agent"
)

// argsOf runs the provider against its fake and returns the argv and
// stdin the fake saw.
func argsOf(t *testing.T, name string, req *agent.Request, tweak func(*agent.CLIOptions)) ([]string, string) {
	t.Helper()
	f := newFake(t, name)
	opts := f.opts(false)
	if tweak != nil {
		tweak(&opts)
	}
	if req.Prompt == "" {
		req.Prompt = "fake:ok"
	}
	req.WorkDir = f.dir
	_, err := f.provider(opts).Run(context.Background(), req, nil)
	require.NoError(t, err)
	inv := f.invocation(t)
	return inv.Args, inv.Stdin
}

func flagValue(args []string, name string) (string, bool) {
	val, found := "", false
	for i, a := range args {
		if a == name && i+1 < len(args) {
			val, found = args[i+1], true
		}
	}
	return val, found
}

func TestClaudeArgs(t *testing.T) {
	cases := []struct {
		name     string
		req      agent.Request
		tweak    func(*agent.CLIOptions)
		want     map[string]string // flag → value ("" = flag absent)
		system   []string          // substrings of --append-system-prompt
		maxTurns string
		stdinHas string
	}{
		{name: "defaults", req: agent.Request{Prompt: "do it fake:ok"},
			want:     map[string]string{"--permission-mode": "acceptEdits", "--allowedTools": "Read,Glob,Grep,LS,TodoWrite,Edit,MultiEdit,Write,NotebookEdit,Bash", "--model": "", "--effort": "", "--resume": ""},
			stdinHas: "do it fake:ok"},
		{name: "model and effort", req: agent.Request{Model: "claude-opus-4-1", ReasoningEffort: "high"},
			want: map[string]string{"--model": "claude-opus-4-1", "--effort": "high"}},
		{name: "default model from options", req: agent.Request{}, tweak: func(o *agent.CLIOptions) { o.Model = "sonnet" },
			want: map[string]string{"--model": "sonnet"}},
		{name: "verifier role", req: agent.Request{Role: "verifier"},
			want:   map[string]string{"--permission-mode": "default", "--allowedTools": "Read,Glob,Grep,LS,TodoWrite,Bash", "--max-turns": "40"},
			system: []string{"You are the verifier", "OUTCOME:PASS"}},
		{name: "planning mode", req: agent.Request{Role: "coder", Attrs: map[string]string{"workflow_mode": "planning"}},
			want:   map[string]string{"--permission-mode": "default", "--allowedTools": "Read,Glob,Grep,LS,TodoWrite,Edit(docs/**),MultiEdit(docs/**),Write(docs/**)"},
			system: []string{"You are the coder", "Write files only under docs/"}},
		{name: "explicit permissions", req: agent.Request{Permissions: []string{"read", "network"}, System: "Be brief."},
			want:   map[string]string{"--permission-mode": "default", "--allowedTools": "Read,Glob,Grep,LS,TodoWrite,WebFetch,WebSearch"},
			system: []string{"Be brief."}},
		{name: "all", req: agent.Request{Permissions: []string{"all"}},
			want: map[string]string{"--permission-mode": "bypassPermissions", "--allowedTools": ""}},
		{name: "extra args", req: agent.Request{}, tweak: func(o *agent.CLIOptions) { o.Args = []string{"--add-dir", "/x"} },
			want: map[string]string{"--add-dir": "/x"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args, stdin := argsOf(t, "claude", &tc.req, tc.tweak)
			require.Equal(t, []string{"-p", "--output-format", "stream-json", "--verbose"}, args[:4])
			for flag, want := range tc.want {
				got, ok := flagValue(args, flag)
				if want == "" {
					require.False(t, ok, "%s should be absent: %q", flag, args)
					continue
				}
				require.Equal(t, want, got, "%s in %q", flag, args)
			}
			sys, _ := flagValue(args, "--append-system-prompt")
			for _, s := range tc.system {
				require.Contains(t, sys, s)
			}
			if tc.system == nil {
				require.NotContains(t, args, "--append-system-prompt")
			}
			if tc.stdinHas != "" {
				require.Equal(t, tc.stdinHas, stdin)
			}
		})
	}
}

// An unknown role fails the run before anything starts, naming the roles.
func TestClaudeUnknownRole(t *testing.T) {
	f := newFake(t, "claude")
	_, err := f.provider(f.opts(false)).Run(context.Background(), &agent.Request{Prompt: "fake:ok", Role: "wizard"}, nil)
	require.ErrorIs(t, err, agent.ErrTerminal)
	require.Contains(t, err.Error(), `unknown role "wizard"`)
	require.Contains(t, err.Error(), "coder, docreviewer, orchestrator, planner, verifier")
}

// A user role directory replaces a built-in role for the provider.
func TestClaudeUserRole(t *testing.T) {
	roles := agent.BuiltinRoles()
	roles["coder"] = agent.Role{Name: "coder", System: "Write Go only.", Capabilities: []string{"read"}}
	args, _ := argsOf(t, "claude", &agent.Request{Role: "coder"}, func(o *agent.CLIOptions) { o.Roles = roles })
	sys, _ := flagValue(args, "--append-system-prompt")
	require.Equal(t, "Write Go only.", sys)
	mode, _ := flagValue(args, "--permission-mode")
	require.Equal(t, "default", mode)
}
