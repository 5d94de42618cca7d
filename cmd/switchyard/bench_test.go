package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBenchQuickJSON runs switchyard bench end to end on tiny sizes and
// checks the shape of its JSON: every group measured, each row with its
// baselines and ratio (and the spread of its rounds' ratios), the targets
// judged. Speed is not checked.
func TestBenchQuickJSON(t *testing.T) {
	code, out, errOut := cli(t, "bench", "--quick", "--json", "--chains", "3", "--events", "30", "--fanout", "3",
		"--idle", "20", "--cli-runs", "1", "--binary", switchyardBinary(t))
	require.Equal(t, 0, code, "stderr: %s\nstdout: %s", errOut, out)
	var got struct {
		Rows []struct {
			Group     string  `json:"group"`
			Case      string  `json:"case"`
			Unit      string  `json:"unit"`
			Value     float64 `json:"value"`
			Ratio     float64 `json:"ratio"`
			RatioMin  float64 `json:"ratio_min"`
			RatioMax  float64 `json:"ratio_max"`
			Target    string  `json:"target"`
			Met       *bool   `json:"met"`
			Error     string  `json:"error"`
			Baselines []struct {
				Name  string  `json:"name"`
				Value float64 `json:"value"`
			} `json:"baselines"`
		} `json:"rows"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	groups := map[string]int{}
	for _, r := range got.Rows {
		groups[r.Group]++
		require.Empty(t, r.Error, r.Case)
		require.NotEmpty(t, r.Case)
		require.NotEmpty(t, r.Unit, r.Case)
		require.NotEmpty(t, r.Baselines, r.Case)
		for _, b := range r.Baselines {
			require.NotEmpty(t, b.Name, r.Case)
		}
		if r.Target != "" {
			require.NotNil(t, r.Met, r.Case)
		}
		if r.Unit != "goroutines/node" && r.Unit != "B/node" {
			require.Positive(t, r.Value, r.Case)
			require.Positive(t, r.Ratio, r.Case)
		}
		if r.Group == "chain" || r.Group == "ingest" || r.Group == "fanout" {
			// Measured in two rounds against their baseline (--quick):
			// the rows say how far apart the rounds' ratios were.
			require.Positive(t, r.RatioMin, r.Case)
			require.LessOrEqual(t, r.RatioMin, r.RatioMax, r.Case)
		}
	}
	// chain: N=3 with and without checkpoints, and with named sessions
	// (no prepared store); ingest: 3 shapes × durable or not, and a
	// durable one through the session's intake; one fan-out; idle: heap,
	// goroutines, start; cli: 3 runs.
	require.Equal(t, map[string]int{"chain": 3, "ingest": 7, "fanout": 1, "idle": 3, "cli": 3}, groups)
}
