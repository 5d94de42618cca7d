package agent_test

import (
	"context"
	"testing"

	"github.com/switchyard/switchyard/nodes/agent"
)

// BenchmarkCLIRun measures what a provider adds around one agent run: start
// the fake in its own process group, parse its stream, reap it.
func BenchmarkCLIRun(b *testing.B) {
	for _, name := range cliNames {
		b.Run(name, func(b *testing.B) {
			var p agent.Provider
			opts := agent.CLIOptions{Bin: fakeBins[name], Model: "gpt-5"}
			switch name {
			case "claude":
				p = agent.NewClaude(opts)
			case "codex":
				p = agent.NewCodex(opts)
			default:
				p = agent.NewGemini(opts)
			}
			req := &agent.Request{NodeID: "n", Prompt: "fake:ok", WorkDir: b.TempDir()}
			for b.Loop() {
				if _, err := p.Run(context.Background(), req, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
