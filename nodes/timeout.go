package nodes

import (
	"context"
	"time"
)

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
