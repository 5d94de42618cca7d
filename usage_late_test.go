package switchyard_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard"
	"github.com/switchyard/switchyard/nodes"
)

// A handler that keeps its Input's OnUsage and reports through it after
// its firing ended charges nothing: the firing's outcome carries its
// usage. (Firings' jobs are pooled: the late report used to charge
// whichever firing reused the job, here the next node's, past the
// session's token budget.)
func TestUsageReportedAfterTheFiringIsNotCharged(t *testing.T) {
	for _, durable := range []bool{true, false} {
		var kept func(nodes.Usage)
		g := switchyard.New("late", switchyard.GraphAttr("budget_tokens", "100")).
			Handler("keep", switchyard.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
				in.OnUsage(nodes.Usage{OutputTokens: 10})
				kept = in.OnUsage // against the rules: a handler does not retain its Input
				return &nodes.Outcome{Status: nodes.StatusSuccess, Usage: nodes.Usage{OutputTokens: 10}}, nil
			})).
			Handler("late", switchyard.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
				kept(nodes.Usage{OutputTokens: 1000}) // the first node's firing is over
				in.OnUsage(nodes.Usage{OutputTokens: 20})
				return &nodes.Outcome{Status: nodes.StatusSuccess, Usage: nodes.Usage{OutputTokens: 20}}, nil
			})).
			Chain("keep", "late")
		var opts []switchyard.Option
		if !durable {
			opts = append(opts, switchyard.WithoutCheckpoints())
		}
		rep, err := switchyard.Run(testCtx(t), g, switchyard.Message{Text: "x"}, opts...)
		require.NoError(t, err, "durable=%v", durable)
		require.Equal(t, switchyard.RunSuccess, rep.Status)
		require.Equal(t, int64(30), rep.Usage.OutputTokens, "durable=%v: the late report was not charged", durable)
	}
}
