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

// TestRatioOfAMachineThatSpeedsUp: a case exactly as fast as its baseline
// at every moment of a machine that speeds up through the run has a ratio
// of 1. The baseline's four rounds around the case's three used to have
// their third-lowest as their median, which made this ratio 0.83 (25 / 30).
func TestRatioOfAMachineThatSpeedsUp(t *testing.T) {
	base := &series{rounds: []float64{10, 20, 30, 40}, samples: []float64{10, 20, 30, 40}}
	c := &series{rounds: []float64{15, 25, 35}, samples: []float64{15, 25, 35}}
	r := Row{Value: c.median()}
	r.spread(c, base)
	r.base("floor", base.median())
	require.InDelta(t, 25.0, r.Baselines[0].Value, 1e-9)
	require.InDelta(t, 1.0, r.Ratio, 1e-9)
	require.InDelta(t, 1.0, r.RatioMin, 1e-9)
	require.InDelta(t, 1.0, r.RatioMax, 1e-9)
}

// TestMedianOfEvenCount: the mean of the two in the middle, not the upper
// one.
func TestMedianOfEvenCount(t *testing.T) {
	require.Equal(t, 2.5, median([]float64{4, 1, 3, 2}))
	require.Equal(t, 2.0, median([]float64{3, 1, 2}))
	require.Equal(t, 0.0, median(nil))
}
