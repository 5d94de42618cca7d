package agent_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/nodes/agent"
)

func TestRegisterCLI(t *testing.T) {
	t.Setenv("SWITCHYARD_CLAUDE_BIN", fakeBins["claude"])
	t.Setenv("SWITCHYARD_CODEX_BIN", "no-such-codex")
	t.Setenv("SWITCHYARD_GEMINI_BIN", "")
	t.Setenv("SWITCHYARD_COMMAND_BIN", "cat")
	r := agent.NewRegistry()
	r.Register("mock", agent.NewMock(nil))
	agent.RegisterCLI(r, agent.CLIOptions{Bin: "ignored"})
	for _, name := range append([]string{"mock"}, agent.CLIProviders...) {
		t.Run(name, func(t *testing.T) {
			p, err := r.Lookup(name)
			require.NoError(t, err)
			require.Equal(t, name, p.Name())
		})
	}
	claude, _ := r.Lookup("claude")
	require.NoError(t, claude.(agent.Checker).Check(context.Background()))
	codex, _ := r.Lookup("codex")
	require.ErrorIs(t, codex.(agent.Checker).Check(context.Background()), agent.ErrNotInstalled)
	gemini, _ := r.Lookup("gemini-cli")
	require.Equal(t, "gemini", gemini.(*agent.Gemini).Bin())
	cmd, _ := r.Lookup("command")
	res, err := cmd.Run(context.Background(), &agent.Request{Prompt: "via default"}, nil)
	require.NoError(t, err)
	require.Equal(t, "via default", res.Text)
}
