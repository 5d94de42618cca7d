package agent_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/nodes/agent"
)

func TestGeminiArgs(t *testing.T) {
	long := strings.Repeat("x", 70<<10) + " fake:ok"
	cases := []struct {
		name   string
		req    agent.Request
		want   map[string]string
		prompt []string // substrings of --prompt=
		stdin  string
	}{
		{name: "defaults", req: agent.Request{Prompt: "-starts with a dash fake:ok"},
			want: map[string]string{"--output-format": "stream-json", "--approval-mode": "yolo"}, prompt: []string{"-starts with a dash fake:ok"}},
		{name: "model", req: agent.Request{Model: "gemini-2.5-flash"},
			want: map[string]string{"--model": "gemini-2.5-flash"}},
		{name: "planner", req: agent.Request{Role: "planner"},
			want: map[string]string{"--approval-mode": "auto_edit"}, prompt: []string{"You are the planner", "fake:ok"}},
		{name: "read only", req: agent.Request{Permissions: []string{"read"}},
			want: map[string]string{"--approval-mode": "default"}},
		{name: "long prompt on stdin", req: agent.Request{Prompt: long},
			prompt: []string{"standard input"}, stdin: long},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args, stdin := argsOf(t, "gemini", &tc.req, nil)
			for flag, want := range tc.want {
				got, ok := flagValue(args, flag)
				require.True(t, ok, "%s missing in %q", flag, args)
				require.Equal(t, want, got)
			}
			last := args[len(args)-1]
			require.True(t, strings.HasPrefix(last, "--prompt="), "last arg %q", last)
			for _, s := range tc.prompt {
				require.Contains(t, last, s)
			}
			require.Equal(t, tc.stdin, stdin)
		})
	}
}
