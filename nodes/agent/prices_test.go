package agent_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/nodes/agent"
)

func TestPricesLookup(t *testing.T) {
	p := agent.DefaultPrices()
	cases := []struct {
		model string
		want  float64 // input price
		ok    bool
	}{
		{"gpt-5", 1.25, true},
		{"gpt-5-mini-2025-08-07", 0.25, true}, // the longer pattern wins
		{"GPT-5-Codex", 1.25, true},
		{"claude-sonnet-4-5-20250929", 3, true},
		{"claude-opus-4-1", 15, true},
		{"claude-opus-4-5", 5, true},
		{"gemini-2.5-flash-lite", 0.1, true},
		{"sonnet", 3, true},
		{"llama-3", 0, false},
		{"", 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.model, func(t *testing.T) {
			pr, ok := p.Lookup(tc.model)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, pr.Input)
		})
	}
}

func TestPricesCost(t *testing.T) {
	p := agent.Prices{"m": {Input: 2, CachedInput: 0.5, Output: 8}, "n": {Input: 1, Output: 1}}
	cases := []struct {
		name            string
		model           string
		in, cached, out int64
		want            float64
		ok              bool
	}{
		{"plain", "m", 1_000_000, 0, 1_000_000, 10, true},
		{"cached", "m", 1_000_000, 400_000, 0, 1.2 + 0.2, true},
		{"cached beyond input is clamped", "m", 100, 1000, 0, 0.00005, true},
		{"no cached price: input price", "n", 1_000_000, 500_000, 0, 1, true},
		{"unknown", "x", 1, 0, 1, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := p.Cost(tc.model, tc.in, tc.cached, tc.out)
			require.Equal(t, tc.ok, ok)
			require.InDelta(t, tc.want, got, 1e-12)
		})
	}
}

func TestLoadPrices(t *testing.T) {
	cases := []struct {
		name, file string
		err        string
		model      string
		input      float64
	}{
		{name: "override and add", file: `{"gpt-5": {"input": 9, "output": 9}, "local-*": {"input": 0.5, "output": 1}}`, model: "gpt-5", input: 9},
		{name: "added pattern", file: `{"local-*": {"input": 0.5, "output": 1}}`, model: "local-llama", input: 0.5},
		{name: "built-ins kept", file: `{}`, model: "o3", input: 2},
		{name: "unknown field", file: `{"m": {"inptu": 1}}`, err: `unknown field "inptu"`},
		{name: "negative", file: `{"m": {"input": -1}}`, err: "negative price"},
		{name: "star inside", file: `{"a*b": {"input": 1}}`, err: "bad model name"},
		{name: "not json", file: `gpt-5 = 1`, err: "prices:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "prices.json")
			require.NoError(t, os.WriteFile(path, []byte(tc.file), 0o644))
			p, err := agent.LoadPrices(path)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				require.ErrorContains(t, err, path)
				return
			}
			require.NoError(t, err)
			pr, ok := p.Lookup(tc.model)
			require.True(t, ok)
			require.Equal(t, tc.input, pr.Input)
		})
	}
	_, err := agent.LoadPrices(filepath.Join(t.TempDir(), "missing.json"))
	require.Error(t, err)
}
