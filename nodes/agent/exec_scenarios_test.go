package agent_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/nodes/agent"
)

// TestCLIScenarios runs each CLI provider against its fake in every
// scenario a user meets: a good run, malformed lines, and each kind of
// failure, and checks what the user sees.
func TestCLIScenarios(t *testing.T) {
	const (
		claudeSession = "c0ffee00-0000-4000-8000-000000000001"
		codexThread   = "0199a213-81c0-7800-8aa1-bbab2a035a53"
		geminiSession = "8e7e1d4a-5b0c-4d4e-9f3a-000000000001"
	)
	claudeOK := agent.Usage{InputTokens: 150, OutputTokens: 50, Cost: 0.0123}
	// gpt-5: 800 fresh input × $1.25 + 200 cached × $0.125 + 300 output × $10, per million.
	codexOK := agent.Usage{InputTokens: 1000, OutputTokens: 300, Cost: 0.004025}
	// gemini-2.5-pro: 400 × $1.25 + 100 cached × $0.31 + 80 × $10, per million.
	geminiOK := agent.Usage{InputTokens: 500, OutputTokens: 80, Cost: 0.001331}

	cases := []struct {
		name      string
		provider  string
		scenario  string
		opts      func(*agent.CLIOptions)
		text      string
		usage     *agent.Usage
		session   string
		tools     []string
		note      string
		failed    bool        // a result with Success false and no error
		class     agent.Class // "" = no error
		retryable bool
		msg       string
	}{
		{name: "ok", provider: "claude", scenario: "ok", text: "Hello\n\nworld", usage: &claudeOK, session: claudeSession, tools: []string{"Bash"}},
		{name: "malformed lines", provider: "claude", scenario: "malformed", text: "Hello\n\nworld", usage: &claudeOK, session: claudeSession, note: "skipped 2 malformed output line(s)"},
		{name: "rate limit", provider: "claude", scenario: "rate_limit", class: agent.ClassRateLimit, retryable: true, msg: "API Error: 429"},
		{name: "overloaded", provider: "claude", scenario: "overloaded", class: agent.ClassRateLimit, retryable: true, msg: "Overloaded"},
		{name: "auth", provider: "claude", scenario: "auth", class: agent.ClassAuth, msg: "Invalid API key · Please run /login"},
		{name: "bad request", provider: "claude", scenario: "bad_request", class: agent.ClassBadRequest, msg: "prompt is too long"},
		{name: "network", provider: "claude", scenario: "network", class: agent.ClassNetwork, retryable: true, msg: "ECONNRESET"},
		{name: "crash", provider: "claude", scenario: "crash", class: agent.ClassUnknown, msg: "something unexpected happened"},
		{name: "max turns", provider: "claude", scenario: "max_turns", failed: true, text: "Still working on it", note: "maximum number of turns"},

		{name: "ok", provider: "codex", scenario: "ok", text: "world", usage: &codexOK, session: codexThread, tools: []string{"shell: bash -lc ls", "edit"}},
		{name: "malformed lines", provider: "codex", scenario: "malformed", text: "world", usage: &codexOK, note: "skipped 2 malformed output line(s)"},
		{name: "transient stream error", provider: "codex", scenario: "transient", text: "world", usage: &codexOK},
		{name: "rate limit", provider: "codex", scenario: "rate_limit", class: agent.ClassRateLimit, retryable: true, msg: "429 Too Many Requests"},
		{name: "auth", provider: "codex", scenario: "auth", class: agent.ClassAuth, msg: "401 Unauthorized"},
		{name: "server", provider: "codex", scenario: "server", class: agent.ClassServer, retryable: true, msg: "503 Service Unavailable"},
		{name: "crash", provider: "codex", scenario: "crash", class: agent.ClassUnknown, msg: "panicked"},
		{name: "no price", provider: "codex", scenario: "ok", opts: func(o *agent.CLIOptions) { o.Model = "my-own-model" },
			text: "world", usage: &agent.Usage{InputTokens: 1000, OutputTokens: 300}, note: `no price for model "my-own-model"`},
		{name: "user price", provider: "codex", scenario: "ok", opts: func(o *agent.CLIOptions) {
			o.Model = "my-own-model"
			o.Prices = agent.Prices{"my-own-*": {Input: 1, Output: 2}}
		}, text: "world", usage: &agent.Usage{InputTokens: 1000, OutputTokens: 300, Cost: 0.0016}},

		{name: "ok", provider: "gemini", scenario: "ok", text: "Hello world", usage: &geminiOK, session: geminiSession, tools: []string{"run_shell_command"}},
		{name: "malformed lines", provider: "gemini", scenario: "malformed", text: "Hello world", usage: &geminiOK, note: "skipped 2 malformed output line(s), the first: Loaded cached credentials."},
		{name: "rate limit", provider: "gemini", scenario: "rate_limit", class: agent.ClassRateLimit, retryable: true, msg: "429 Too Many Requests"},
		{name: "auth", provider: "gemini", scenario: "auth", class: agent.ClassAuth, msg: "GEMINI_API_KEY"},
		{name: "json format", provider: "gemini", scenario: "ok", opts: func(o *agent.CLIOptions) {
			o.Args = []string{"--output-format", "json"}
			o.Model = "gemini-2.5-pro"
		}, text: "Hello world", usage: &geminiOK, session: geminiSession},
		{name: "json format auth", provider: "gemini", scenario: "auth", opts: func(o *agent.CLIOptions) { o.Args = []string{"--output-format", "json"} },
			class: agent.ClassAuth, msg: "must specify the GEMINI_API_KEY"},
	}
	for _, tc := range cases {
		t.Run(tc.provider+"/"+tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, tc.provider)
			opts := f.opts(false)
			if tc.provider == "codex" {
				opts.Model = "gpt-5"
			}
			if tc.opts != nil {
				tc.opts(&opts)
			}
			p := f.provider(opts)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			rec := &recorder{}
			res, err := p.Run(ctx, &agent.Request{NodeID: "n1", Prompt: "Say hello. fake:" + tc.scenario, WorkDir: f.dir}, rec.on)

			if tc.class != "" {
				require.Error(t, err)
				var ae *agent.Error
				require.True(t, errors.As(err, &ae), "error %T %v", err, err)
				require.Equal(t, tc.class, ae.Class, "error: %v", err)
				require.Equal(t, tc.retryable, errors.Is(err, agent.ErrRetryable), "error: %v", err)
				require.Equal(t, !tc.retryable, errors.Is(err, agent.ErrTerminal), "error: %v", err)
				require.Contains(t, err.Error(), tc.msg)
				require.Contains(t, err.Error(), p.Name()+": ")
				return
			}
			require.NoError(t, err)
			require.NotNil(t, res)
			require.Equal(t, !tc.failed, res.Success)
			require.Equal(t, tc.text, res.Text)
			if tc.usage != nil {
				require.Equal(t, tc.usage.InputTokens, res.Usage.InputTokens)
				require.Equal(t, tc.usage.OutputTokens, res.Usage.OutputTokens)
				require.InDelta(t, tc.usage.Cost, res.Usage.Cost, 1e-9)
				// Usage events add up to the run's usage.
				require.Equal(t, res.Usage.InputTokens, rec.usage().InputTokens)
				require.InDelta(t, res.Usage.Cost, rec.usage().Cost, 1e-9)
			}
			if tc.session != "" {
				require.Equal(t, tc.session, res.SessionID)
			}
			if tc.tools != nil {
				require.Equal(t, tc.tools, res.ToolCalls)
				require.Equal(t, tc.tools, rec.tools())
			}
			if tc.note != "" {
				require.Contains(t, res.Notes, tc.note)
			} else {
				require.Empty(t, res.Notes)
			}
			require.NotEmpty(t, rec.text(), "no text was streamed")
		})
	}
}
