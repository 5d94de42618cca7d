package nodes

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"
)

// Middleware wraps a handler: logging, timeouts, retries, recovery.
type Middleware func(Handler) Handler

// Chain wraps h with mws; the first middleware is the outermost.
func Chain(h Handler, mws ...Middleware) Handler {
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i](h)
	}
	return h
}

// Recover turns a panic in the handler into an error carrying the panic
// value and stack.
func Recover() Middleware {
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, in *Input) (o *Outcome, err error) {
			defer func() {
				if r := recover(); r != nil {
					o, err = nil, fmt.Errorf("handler panicked: %v\n%s", r, debug.Stack())
				}
			}()
			return next.Handle(ctx, in)
		})
	}
}

// Timeout bounds the handler with d (when ctx has no earlier deadline).
func Timeout(d time.Duration) Middleware {
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, in *Input) (*Outcome, error) {
			ctx, cancel := context.WithTimeout(ctx, d)
			defer cancel()
			return next.Handle(ctx, in)
		})
	}
}
