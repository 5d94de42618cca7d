package nodes

import (
	"context"
	"fmt"
	"runtime/debug"
)

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
