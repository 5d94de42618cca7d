package agent_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/nodes/agent"
)

func TestBuiltinRoles(t *testing.T) {
	roles := agent.BuiltinRoles()
	want := map[string]struct {
		caps []string
		loop string
	}{
		"orchestrator": {[]string{"read", "edit:docs/"}, agent.LoopContinuous},
		"planner":      {[]string{"read", "edit:docs/"}, agent.LoopOnce},
		"coder":        {[]string{"read", "edit", "shell"}, agent.LoopUntilPass},
		"verifier":     {[]string{"read", "shell"}, agent.LoopOnce},
		"docreviewer":  {[]string{"read", "edit:docs/"}, agent.LoopOnce},
	}
	require.Len(t, roles, len(want))
	for name, w := range want {
		t.Run(name, func(t *testing.T) {
			r, ok := roles[name]
			require.True(t, ok)
			require.Equal(t, name, r.Name)
			require.Equal(t, w.caps, r.Capabilities)
			require.Equal(t, w.loop, r.Loop)
			require.NotEmpty(t, r.Description)
			require.Contains(t, r.System, "You are the")
			require.Positive(t, r.MaxTurns)
		})
	}
}

func TestLoadRoles(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]string
		err   string
		check func(t *testing.T, roles map[string]agent.Role)
	}{
		{name: "override and add", files: map[string]string{
			"coder.md":    "---\ncapabilities: read, edit\nloop: once\n---\nWrite Go.\n",
			"reviewer.md": "---\ndescription: reviews\ncapabilities: read\nmax_turns: 5\n# a comment\n---\n\nReview the diff.\n",
			"notes.txt":   "ignored",
		}, check: func(t *testing.T, roles map[string]agent.Role) {
			require.Equal(t, "Write Go.", roles["coder"].System)
			require.Equal(t, []string{"read", "edit"}, roles["coder"].Capabilities)
			require.Equal(t, agent.LoopOnce, roles["coder"].Loop)
			require.Equal(t, agent.Role{Name: "reviewer", Description: "reviews", System: "Review the diff.",
				Capabilities: []string{"read"}, Loop: agent.LoopOnce, MaxTurns: 5}, roles["reviewer"])
			require.Contains(t, roles, "planner")
			require.Len(t, roles, 6)
		}},
		{name: "no header", files: map[string]string{"plain.md": "Just instructions."}, check: func(t *testing.T, roles map[string]agent.Role) {
			require.Equal(t, "Just instructions.", roles["plain"].System)
			require.Nil(t, roles["plain"].Capabilities)
		}},
		{name: "unknown key", files: map[string]string{"x.md": "---\ncolour: red\n---\nhi"}, err: `x.md: header line 2: unknown key "colour"`},
		{name: "unknown capability", files: map[string]string{"x.md": "---\ncapabilities: read, fly\n---\nhi"}, err: `unknown capability "fly"`},
		{name: "escaping edit dir", files: map[string]string{"x.md": "---\ncapabilities: edit:../etc/\n---\nhi"}, err: "unknown capability"},
		{name: "bad loop", files: map[string]string{"x.md": "---\nloop: forever\n---\nhi"}, err: `unknown loop "forever"`},
		{name: "bad max_turns", files: map[string]string{"x.md": "---\nmax_turns: many\n---\nhi"}, err: "max_turns"},
		{name: "unclosed header", files: map[string]string{"x.md": "---\nloop: once\nhi"}, err: "no closing ---"},
		{name: "empty body", files: map[string]string{"x.md": "---\nloop: once\n---\n"}, err: "no system instructions"},
		{name: "bad name", files: map[string]string{"a b.md": "hi"}, err: "bad role name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range tc.files {
				require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
			}
			roles, err := agent.LoadRoles(dir)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			tc.check(t, roles)
		})
	}
	_, err := agent.LoadRoles(filepath.Join(t.TempDir(), "missing"))
	require.Error(t, err)
}

func TestPlanningCapabilities(t *testing.T) {
	require.Equal(t, []string{"read", "edit:docs/"}, agent.PlanningCapabilities([]string{"read", "edit", "shell", "all"}))
	require.Equal(t, []string{"read", "edit:docs/", "network"}, agent.PlanningCapabilities([]string{"network"}))
}
