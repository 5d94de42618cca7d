package actors

import (
	"time"

	"github.com/switchyard/switchyard/graph"
)

// RetryPolicy is one of the spec's retry presets (section 3.6).
type RetryPolicy struct {
	Attempts int           // runs in all, the first included
	Initial  time.Duration // delay before the first retry
	Factor   float64       // growth of the delay per retry
}

// RetryPolicies are the presets a node chooses with retry_policy=NAME.
var RetryPolicies = map[string]RetryPolicy{
	"none":       {Attempts: 1},
	"standard":   {Attempts: 5, Initial: 200 * time.Millisecond, Factor: 2},
	"aggressive": {Attempts: 5, Initial: 500 * time.Millisecond, Factor: 2},
	"linear":     {Attempts: 3, Initial: 500 * time.Millisecond, Factor: 1},
	"patient":    {Attempts: 3, Initial: 2 * time.Second, Factor: 3},
}

// maxBackoff caps every retry delay.
const maxBackoff = time.Minute

// maxRetryAfter caps the wait a server may ask for before a retry
// (Outcome.RetryAfter); the node's timeout and budgets still apply.
const maxRetryAfter = 10 * time.Minute

// Delay is the delay before retry n (n >= 1), without jitter.
func (p RetryPolicy) Delay(n int) time.Duration {
	d := float64(p.Initial)
	for i := 1; i < n; i++ {
		d *= p.Factor
		if d > float64(maxBackoff) {
			return maxBackoff
		}
	}
	if d > float64(maxBackoff) {
		return maxBackoff
	}
	return time.Duration(d)
}

// StandardBackoff is the standard preset's delay before retry n, times a
// jitter in [0.5, 1.5).
func StandardBackoff(n int) time.Duration {
	return time.Duration(float64(RetryPolicies["standard"].Delay(n)) * (0.5 + jitter()))
}

// retryPolicy is a node's policy: retry_policy chooses a preset; an explicit
// max_retries (or the graph's default) sets the number of attempts.
func retryPolicy(g *graph.Graph, n *graph.Node) (maxRetries int, delay func(int) time.Duration) {
	p, maxRetries := policyOf(g, n)
	return maxRetries, func(k int) time.Duration {
		return time.Duration(float64(p.Delay(k)) * (0.5 + jitter()))
	}
}

// policyOf is the node's retry preset and its number of retries (what
// retryPolicy's delay is made of; a firing makes that only to retry).
func policyOf(g *graph.Graph, n *graph.Node) (p RetryPolicy, maxRetries int) {
	p, named := RetryPolicies[n.Attrs.String("retry_policy")]
	if !named {
		p = RetryPolicies["standard"]
	}
	maxRetries = n.MaxRetries(g)
	if named && !n.Attrs.Has("max_retries") {
		maxRetries = p.Attempts - 1
	}
	return p, maxRetries
}
