package agenttest_test

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"go.uber.org/goleak"

	"github.com/switchyard/switchyard/nodes/agent"
	"github.com/switchyard/switchyard/nodes/agent/agenttest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The mock provider conforms.
func TestMockConforms(t *testing.T) {
	agenttest.Run(t, func(*testing.T) agent.Provider {
		return agent.NewMock(map[string][]agent.MockResult{
			"conformance_node": {{Status: "success", Response: "hello from the mock",
				Usage: &agent.MockUsage{InputTokens: 5, OutputTokens: 7, Cost: 0.01}}},
		})
	}, agenttest.WithName("mock"), agenttest.WithPrompt("Say hello", "hello"))
}

// hanging runs until its context ends, streaming text first; it checks the
// hang check with a provider that can hang.
type hanging struct{}

func (hanging) Name() string { return "hanging" }
func (hanging) Run(ctx context.Context, req *agent.Request, onEvent func(agent.Event)) (*agent.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if req.Prompt == "hang" {
		if onEvent != nil {
			onEvent(agent.Event{Kind: "text", Text: "working"})
		}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if onEvent != nil {
		onEvent(agent.Event{Kind: "text", Text: "ok"})
	}
	return &agent.Result{Text: "ok: " + req.Prompt, Success: true}, nil
}

func TestHangingProviderConforms(t *testing.T) {
	agenttest.Run(t, func(*testing.T) agent.Provider { return hanging{} },
		agenttest.WithHangPrompt("hang"), agenttest.WithPrompt("Say hello", "ok: Say hello"))
}

// misbehaving breaks one rule of the contract, chosen by name.
type misbehaving struct{ rule string }

func (m misbehaving) Name() string { return "misbehaving" }
func (m misbehaving) Run(ctx context.Context, req *agent.Request, onEvent func(agent.Event)) (*agent.Result, error) {
	if m.rule != "ignores_ctx" {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	if onEvent != nil {
		switch m.rule {
		case "other_goroutine":
			done := make(chan struct{})
			go func() { defer close(done); onEvent(agent.Event{Kind: "text", Text: "x"}) }()
			<-done
		case "usage_mismatch":
			onEvent(agent.Event{Kind: "usage", Usage: agent.Usage{InputTokens: 1}})
		case "unknown_kind":
			onEvent(agent.Event{Kind: "thinking"})
		}
	}
	if m.rule == "fails" {
		return &agent.Result{Text: "no", Success: false}, nil
	}
	return &agent.Result{Text: "ok", Success: true, Usage: agent.Usage{InputTokens: 2}}, nil
}

// TestMisbehavingProvidersFail runs the checks on providers that break the
// contract, each in a child test process, which must fail.
func TestMisbehavingProvidersFail(t *testing.T) {
	if rule := os.Getenv("AGENTTEST_RULE"); rule != "" {
		agenttest.Run(t, func(*testing.T) agent.Provider { return misbehaving{rule: rule} })
		return
	}
	tests := []struct{ rule, want string }{
		{"other_goroutine", "not the caller's"},
		{"usage_mismatch", "usage events add up"},
		{"unknown_kind", "unknown event kind"},
		{"ignores_ctx", "cancelled_context"},
		{"fails", "the run succeeds"},
	}
	for _, tc := range tests {
		t.Run(tc.rule, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestMisbehavingProvidersFail$", "-test.count=1")
			cmd.Env = append(os.Environ(), "AGENTTEST_RULE="+tc.rule)
			out, err := cmd.CombinedOutput()
			require.Error(t, err, "the checks passed a provider that breaks %s:\n%s", tc.rule, out)
			require.Contains(t, string(out), tc.want)
		})
	}
}
