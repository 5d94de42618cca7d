package nodes_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/nodes/agent"
)

func TestParallel(t *testing.T) {
	tests := []struct {
		name, attrs string
		status      nodes.Status
		text        string
	}{
		{"branches noted", "", nodes.StatusSuccess, "2 branches: a, b"},
		{"wait_all", `, join_policy="wait_all", max_parallel=2`, nodes.StatusSuccess, "2 branches"},
		{"other join policy", `, join_policy="first_success"`, nodes.StatusFail, "not supported"},
		{"zero max_parallel", `, max_parallel=0`, nodes.StatusFail, "max_parallel"},
		{"bad max_parallel", `, max_parallel="many"`, nodes.StatusFail, "max_parallel"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, _ := loadLoose(t, `digraph p { start [shape=Mdiamond]; f [shape=component`+tc.attrs+`]; a; b; j [shape=tripleoctagon]; exit [shape=Msquare]; start -> f; f -> a -> j; f -> b -> j; j -> exit }`)
			o := handle(t, registry(t, nodes.Deps{}), input(t, g, "f"))
			require.Equal(t, tc.status, o.Status)
			require.Contains(t, o.Notes+o.FailureReason, tc.text)
		})
	}
}

const fanGraph = `digraph p { start [shape=Mdiamond]; f [shape=component]; a [prompt="a"]; b [prompt="b"]; c [prompt="c"]; j [shape=tripleoctagon]; exit [shape=Msquare]; start -> f; f -> a -> j; f -> b -> j; f -> c -> j; j -> exit }`

func TestFanIn(t *testing.T) {
	msg := func(branch string, st nodes.Status, updates map[string]string) nodes.Message {
		return nodes.Message{Branch: branch, Status: st, Updates: updates, Response: branch + " said " + string(st)}
	}
	tests := []struct {
		name     string
		msgs     []nodes.Message
		status   nodes.Status
		best     string
		bestStat string
		updates  map[string]string
		results  string
	}{
		{"all succeed", []nodes.Message{msg("b", nodes.StatusSuccess, map[string]string{"x": "2"}), msg("a", nodes.StatusSuccess, map[string]string{"x": "1"})},
			nodes.StatusSuccess, "a", "success", map[string]string{"parallel.a.x": "1", "parallel.b.x": "2"},
			`[{"branch":"a","status":"success","response":"a said success"},{"branch":"b","status":"success","response":"b said success"}]`},
		{"some fail", []nodes.Message{msg("a", nodes.StatusFail, map[string]string{"finding": "bug", "internal.x": "1"}), msg("b", nodes.StatusPartial, nil), msg("c", nodes.StatusRetry, nil)},
			nodes.StatusPartial, "b", "partial_success", map[string]string{"parallel.a.finding": "bug"}, ""},
		{"all fail", []nodes.Message{msg("a", nodes.StatusFail, nil), msg("b", nodes.StatusFail, nil)}, nodes.StatusFail, "a", "fail", nil, ""},
		{"custom status counts as success", []nodes.Message{msg("a", "needs_dod", nil), msg("b", nodes.StatusFail, nil)}, nodes.StatusPartial, "a", "needs_dod", nil, ""},
		{"branch from the sender when unnamed", []nodes.Message{{From: "c", Status: nodes.StatusSuccess, Updates: map[string]string{"k": "v"}}}, nodes.StatusSuccess, "c", "success",
			map[string]string{"parallel.c.k": "v"}, ""},
		{"no status is success", []nodes.Message{{Branch: "a"}}, nodes.StatusSuccess, "a", "success", nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := input(t, load(t, fanGraph), "j")
			in.Messages = tc.msgs
			o := handle(t, registry(t, nodes.Deps{}), in)
			require.Equal(t, tc.status, o.Status)
			require.Equal(t, tc.best, o.ContextUpdates["parallel.fan_in.best_id"])
			require.Equal(t, tc.bestStat, o.ContextUpdates["parallel.fan_in.best_outcome"])
			for k, v := range tc.updates {
				require.Equal(t, v, o.ContextUpdates[k], k)
			}
			for k := range o.ContextUpdates {
				require.NotContains(t, k, "internal.", "internal keys are not merged")
			}
			var results []map[string]string
			require.NoError(t, json.Unmarshal([]byte(o.ContextUpdates["parallel.results"]), &results))
			require.Len(t, results, len(tc.msgs))
			if tc.results != "" {
				require.JSONEq(t, tc.results, o.ContextUpdates["parallel.results"])
			}
		})
	}
	t.Run("no inputs", func(t *testing.T) {
		o := handle(t, registry(t, nodes.Deps{}), input(t, load(t, fanGraph), "j"))
		require.Equal(t, nodes.StatusFail, o.Status)
	})
}

func TestFanInRankedByAgent(t *testing.T) {
	src := `digraph p { start [shape=Mdiamond]; f [shape=component]; a; b; j [shape=tripleoctagon, prompt="Pick the best branch"]; exit [shape=Msquare]; start -> f; f -> a -> j; f -> b -> j; j -> exit }`
	msgs := []nodes.Message{{Branch: "a", Status: nodes.StatusSuccess}, {Branch: "b", Status: nodes.StatusSuccess}}
	tests := []struct {
		name, response string
		err            string
		best           string
		ranked         bool
	}{
		{"the agent's choice", "Thinking...\nBEST: b\n", "", "b", true},
		{"unknown branch: status rank", "BEST: z", "", "a", false},
		{"no choice: status rank", "both fine", "", "a", false},
		{"agent error: status rank", "", "rate_limit", "a", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mock := agent.NewMock(map[string][]agent.MockResult{"j": {{Response: tc.response, Error: tc.err}}})
			in := input(t, load(t, src), "j")
			in.Prompt = "Pick the best branch"
			in.Messages = msgs
			o := handle(t, registry(t, nodes.Deps{Providers: providers(mock, nil)}), in)
			require.Equal(t, nodes.StatusSuccess, o.Status)
			require.Equal(t, tc.best, o.ContextUpdates["parallel.fan_in.best_id"])
			require.Equal(t, tc.ranked, o.ContextUpdates["parallel.fan_in.ranked_by"] == "agent")
			require.Equal(t, 1, mock.Runs("j"))
			if !tc.ranked {
				require.NotEmpty(t, o.Notes)
			}
		})
	}
}
