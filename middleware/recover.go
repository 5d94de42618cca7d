package middleware

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/switchyard/switchyard/nodes"
)

// Recover turns a panic in the handler into an error carrying the panic
// value and stack, so the middleware outside it (Logging, Metrics, Retry)
// see a failure instead of unwinding. The runtime recovers panics of the
// whole chain anyway; Recover is for what sits outside it.
func Recover() nodes.Middleware {
	return func(next nodes.Handler) nodes.Handler {
		return nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (o *nodes.Outcome, err error) {
			defer func() {
				if r := recover(); r != nil {
					o, err = nil, fmt.Errorf("handler panicked: %v\n%s", r, debug.Stack())
				}
			}()
			return next.Handle(ctx, in)
		})
	}
}
