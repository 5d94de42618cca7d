package middleware

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/switchyard/switchyard/nodes"
)

// ErrTimeout is the cause of a handler's context cancelled by Timeout; the
// error Timeout returns wraps it.
var ErrTimeout = errors.New("middleware: timed out")

// Timeout bounds each handler run with d on the configured clock: the
// handler's context is cancelled (cause ErrTimeout) when d passes, and a run
// that then returns anything but success is reported as an error wrapping
// ErrTimeout. A deadline of the caller that comes earlier still holds.
func Timeout(d time.Duration, opts ...Option) nodes.Middleware {
	cfg := configure(opts)
	return func(next nodes.Handler) nodes.Handler {
		return nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
			cause := fmt.Errorf("%w after %s", ErrTimeout, d)
			ctx, cancel := context.WithCancelCause(ctx)
			defer cancel(nil)
			t := cfg.clk.AfterFunc(d, func() { cancel(cause) })
			defer t.Stop()
			o, err := next.Handle(ctx, in)
			if context.Cause(ctx) == cause && (err != nil || o == nil || !o.Status.IsSuccess()) {
				return nil, cause
			}
			return o, err
		})
	}
}
