package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/nodes/agent"
)

// TestCLIConformance holds every CLI provider to the Provider contract.
// (Until agenttest.Run exists; then the providers run through it too.)
func TestCLIConformance(t *testing.T) {
	ctors := map[string]func(t *testing.T) agent.Provider{
		"claude":     func(t *testing.T) agent.Provider { f := newFake(t, "claude"); return f.provider(f.opts(false)) },
		"codex":      func(t *testing.T) agent.Provider { f := newFake(t, "codex"); return f.provider(f.opts(false)) },
		"gemini-cli": func(t *testing.T) agent.Provider { f := newFake(t, "gemini"); return f.provider(f.opts(false)) },
		"command": func(t *testing.T) agent.Provider {
			return agent.NewCommand(agent.CLIOptions{Bin: "echo Hello world"})
		},
	}
	for name, ctor := range ctors {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := ctor(t)
			require.Equal(t, name, p.Name())
			_, isChecker := p.(agent.Checker)
			require.True(t, isChecker, "CLI providers report a missing executable")

			t.Run("events stop when Run returns and add up", func(t *testing.T) {
				returned := false
				var usage agent.Usage
				texts := 0
				res, err := p.Run(context.Background(), &agent.Request{NodeID: "n", Prompt: "fake:ok", WorkDir: t.TempDir()}, func(ev agent.Event) {
					require.False(t, returned, "event after Run returned")
					switch ev.Kind {
					case "usage":
						usage = usage.Add(ev.Usage)
					case "text":
						texts++
					case "tool_call":
						require.NotEmpty(t, ev.Tool)
					default:
						t.Errorf("unknown event kind %q", ev.Kind)
					}
				})
				returned = true
				require.NoError(t, err)
				require.True(t, res.Success)
				require.Contains(t, res.Text, "world")
				require.Positive(t, texts)
				require.Equal(t, res.Usage.InputTokens, usage.InputTokens)
				require.Equal(t, res.Usage.OutputTokens, usage.OutputTokens)
				require.InDelta(t, res.Usage.Cost, usage.Cost, 1e-12)
			})
			t.Run("nil onEvent", func(t *testing.T) {
				res, err := p.Run(context.Background(), &agent.Request{NodeID: "n", Prompt: "fake:ok"}, nil)
				require.NoError(t, err)
				require.True(t, res.Success)
			})
			t.Run("done context", func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				start := time.Now()
				_, err := p.Run(ctx, &agent.Request{NodeID: "n", Prompt: "fake:ok"}, nil)
				require.ErrorIs(t, err, context.Canceled)
				require.Less(t, time.Since(start), time.Second)
			})
		})
	}
}
