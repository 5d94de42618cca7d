package agent_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/nodes/agent"
)

func TestCodexArgs(t *testing.T) {
	cases := []struct {
		name    string
		req     agent.Request
		want    []string // a sequence the argv must hold
		without []string // flags the argv must not hold
		stdin   []string // substrings of the prompt on stdin
	}{
		{name: "defaults", req: agent.Request{Prompt: "do it fake:ok"},
			want: []string{"--sandbox", "workspace-write"}, without: []string{"--model", "resume"}, stdin: []string{"do it fake:ok"}},
		{name: "model and effort", req: agent.Request{Model: "gpt-5-codex", ReasoningEffort: "high"},
			want: []string{"--model", "gpt-5-codex", "-c", `model_reasoning_effort="high"`}},
		{name: "verifier is read-only", req: agent.Request{Role: "verifier"},
			want: []string{"--sandbox", "read-only"}, stdin: []string{"<system_instructions>", "You are the verifier", "</system_instructions>", "fake:ok"}},
		{name: "planning", req: agent.Request{Attrs: map[string]string{"workflow_mode": "planning"}},
			want: []string{"--sandbox", "workspace-write"}, stdin: []string{"Write files only under docs/"}},
		{name: "network", req: agent.Request{Permissions: []string{"edit", "network"}},
			want: []string{"--sandbox", "workspace-write", "-c", "sandbox_workspace_write.network_access=true"}},
		{name: "all", req: agent.Request{Permissions: []string{"all"}},
			want: []string{"--sandbox", "danger-full-access"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args, stdin := argsOf(t, "codex", &tc.req, nil)
			require.Equal(t, []string{"exec", "--json", "--skip-git-repo-check"}, args[:3])
			require.Equal(t, "-", args[len(args)-1])
			require.True(t, containsSeq(args, tc.want), "%q lacks %q", args, tc.want)
			for _, w := range tc.without {
				require.NotContains(t, args, w)
			}
			for _, s := range tc.stdin {
				require.Contains(t, stdin, s)
			}
			if tc.req.Role == "" && tc.req.Attrs == nil {
				require.NotContains(t, stdin, "<system_instructions>")
			}
		})
	}
}
