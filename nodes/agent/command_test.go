package agent_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/nodes/agent"
)

func TestCommandProvider(t *testing.T) {
	cases := []struct {
		name      string
		command   string
		req       agent.Request
		text      string
		session   string
		success   bool
		note      string
		class     agent.Class
		retryable bool
	}{
		{name: "stdout is the response", command: "cat", req: agent.Request{Prompt: "hello there"}, text: "hello there", success: true},
		{name: "system instructions lead the prompt", command: "cat", req: agent.Request{Prompt: "p", System: "be brief"},
			text: "<system_instructions>\nbe brief\n</system_instructions>\n\np", success: true},
		{name: "request in the environment", command: `echo "$SWITCHYARD_MODEL/$SWITCHYARD_REASONING_EFFORT/$SWITCHYARD_RESUME_SESSION/$SWITCHYARD_PERMISSIONS/$SWITCHYARD_NODE"`,
			req: agent.Request{NodeID: "n7", Model: "m1", ReasoningEffort: "low", ResumeSession: "s0", Role: "verifier"}, text: "m1/low/s0/read,shell/n7", success: true},
		{name: "session id line", command: "echo one; echo SWITCHYARD_SESSION_ID=abc; echo two", text: "one\ntwo", session: "abc", success: true},
		{name: "exit status is failure", command: "echo partial; echo 'tests failed' >&2; exit 1", text: "partial", note: "tests failed"},
		{name: "rate limit is retryable", command: "echo 'HTTP 429 Too Many Requests' >&2; exit 1", class: agent.ClassRateLimit, retryable: true},
		{name: "auth is terminal", command: "echo 'error: invalid api key' >&2; exit 2", class: agent.ClassAuth},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := agent.NewCommand(agent.CLIOptions{})
			req := tc.req
			req.WorkDir = t.TempDir()
			req.Attrs = map[string]string{"agent_command": tc.command}
			rec := &recorder{}
			res, err := p.Run(context.Background(), &req, rec.on)
			if tc.class != "" {
				var ae *agent.Error
				require.True(t, errors.As(err, &ae), "err %v", err)
				require.Equal(t, tc.class, ae.Class)
				require.Equal(t, tc.retryable, errors.Is(err, agent.ErrRetryable))
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.success, res.Success)
			require.Equal(t, tc.text, res.Text)
			require.Equal(t, tc.session, res.SessionID)
			require.Contains(t, res.Notes, tc.note)
			require.Equal(t, tc.text+"\n", rec.text())
		})
	}
}

func TestCommandChecks(t *testing.T) {
	p := agent.NewCommand(agent.CLIOptions{})
	ctx := context.Background()
	require.NoError(t, p.Check(ctx))
	require.NoError(t, p.CheckNode(ctx, map[string]string{"agent_command": "cat -u"}))
	require.NoError(t, p.CheckNode(ctx, map[string]string{"agent_command": "FOO=1 anything"}), "shell syntax is left to the shell")
	err := p.CheckNode(ctx, map[string]string{"agent_command": "no-such-agent-xyz --run"})
	require.ErrorIs(t, err, agent.ErrNotInstalled)
	require.Contains(t, err.Error(), `"no-such-agent-xyz"`)
	err = p.CheckNode(ctx, map[string]string{})
	require.ErrorIs(t, err, agent.ErrTerminal)
	require.Contains(t, err.Error(), "agent_command")
	_, err = p.Run(ctx, &agent.Request{Prompt: "x"}, nil)
	require.ErrorIs(t, err, agent.ErrTerminal)

	// A default command serves nodes without agent_command.
	def := agent.NewCommand(agent.CLIOptions{Bin: "tr a-z A-Z"})
	require.NoError(t, def.Check(ctx))
	res, err := def.Run(ctx, &agent.Request{Prompt: "shout"}, nil)
	require.NoError(t, err)
	require.Equal(t, "SHOUT", res.Text)
	require.ErrorIs(t, agent.NewCommand(agent.CLIOptions{Bin: "no-such-agent-xyz"}).Check(ctx), agent.ErrNotInstalled)
}

func TestCommandHangKilled(t *testing.T) {
	p := agent.NewCommand(agent.CLIOptions{Grace: 100 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := p.Run(ctx, &agent.Request{Prompt: "x", Attrs: map[string]string{"agent_command": "trap '' TERM; sleep 60 & sleep 60"}}, nil)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 4*time.Second)
}
