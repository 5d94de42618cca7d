package benchmark

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSpreadPairsEachRoundWithItsBaselines checks the rounds' ratios a row
// reports: each round of a case over the mean of the baseline's rounds
// right before and after it, so that a slow moment of the machine weighs
// on both sides of a ratio.
func TestSpreadPairsEachRoundWithItsBaselines(t *testing.T) {
	base := &series{rounds: []float64{10, 30, 20}}
	c := &series{rounds: []float64{100, 200}}
	var r Row
	r.spread(c, base)
	require.InDelta(t, 100.0/20, r.RatioMin, 1e-9) // 100 over (10+30)/2
	require.InDelta(t, 200.0/25, r.RatioMax, 1e-9) // 200 over (30+20)/2

	// One round, or a row that failed: no spread.
	one := Row{}
	one.spread(&series{rounds: []float64{100}}, &series{rounds: []float64{10, 10}})
	require.Zero(t, one.RatioMax)
	failed := Row{Error: "took too long"}
	failed.spread(c, base)
	require.Zero(t, failed.RatioMax)
}
