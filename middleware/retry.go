package middleware

import (
	"context"
	"fmt"
	"github.com/switchyard/switchyard/clock"
	"time"

	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/nodes/agent"
)

// Retry runs the handler again, in place, when it returns an error or a
// fail or retry status: up to attempts runs in all, waiting backoff(n) on
// the configured clock after the n-th failed run (nil backoff: no wait). It
// stops early when ctx ends. Each retry is announced as a node.retrying
// event (attribute by=middleware); the last run's result is returned, with
// the number of runs in its notes.
//
// Retry is local to the handler: the engine sees one attempt. For retries
// the engine counts (and reports), set the node's max_retries instead.
func Retry(attempts int, backoff func(n int) time.Duration, opts ...Option) nodes.Middleware {
	cfg := configure(opts)
	attempts = max(attempts, 1)
	return func(next nodes.Handler) nodes.Handler {
		return nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
			for n := 1; ; n++ {
				o, err := next.Handle(ctx, in)
				if !failed(o, err) || n >= attempts || ctx.Err() != nil {
					if n > 1 && o != nil {
						o.Notes = agent.JoinNotes(o.Notes, fmt.Sprintf("%d runs (middleware retry)", n))
					}
					return o, err
				}
				if in.Emit != nil {
					in.Emit("node.retrying", map[string]any{"message": reason(o, err), "by": "middleware", "run": n})
				}
				if backoff != nil {
					if !clock.Sleep(ctx, cfg.clk, backoff(n)) {
						return o, err
					}
				}
			}
		})
	}
}

func failed(o *nodes.Outcome, err error) bool {
	return err != nil || o == nil || o.Status == nodes.StatusFail || o.Status == nodes.StatusRetry
}

func reason(o *nodes.Outcome, err error) string {
	switch {
	case err != nil:
		return err.Error()
	case o == nil:
		return "no outcome"
	case o.FailureReason != "":
		return o.FailureReason
	}
	return string(o.Status)
}
