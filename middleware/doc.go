// Package middleware holds the built-in middleware that wraps node
// handlers: Logging (slog), Metrics, Retry with backoff, Timeout and
// Recover. A middleware is a nodes.Middleware, func(Handler) Handler; the
// runtime applies session-wide middleware (session.Config.Middleware, the Go
// API's WithMiddleware) around every node's handler, the first outermost.
//
// The time-based middleware (Retry's backoff, Timeout) run on an injectable
// clock (Clock), so tests drive them with clock.Fake.
//
// Per-node error policies (propagate, retry, skip, continue) are not
// middleware: they are the node attributes max_retries, retry_on_fail and
// on_failure, which the engine applies after the handler and its
// middleware, so a skipped or continued node is reported as such.
package middleware

import (
	"github.com/switchyard/switchyard/clock"
)

// Option configures a built-in middleware.
type Option func(*config)

type config struct {
	clk clock.Clock
}

// Clock makes the middleware measure and wait on c (default: the real
// clock).
func Clock(c clock.Clock) Option { return func(cfg *config) { cfg.clk = c } }

func configure(opts []Option) config {
	cfg := config{clk: clock.Real()}
	for _, o := range opts {
		o(&cfg)
	}
	return cfg
}
