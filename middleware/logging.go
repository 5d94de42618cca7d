package middleware

import (
	"context"
	"log/slog"

	"github.com/switchyard/switchyard/nodes"
)

// Logging logs every handler run on l: "node started" at debug level, then
// "node finished" at info level (warn when it failed or returned an error)
// with the session, node, type, attempt, status, duration, usage and, when
// the session has one, the caller's tenant, user and trace.
func Logging(l *slog.Logger, opts ...Option) nodes.Middleware {
	cfg := configure(opts)
	return func(next nodes.Handler) nodes.Handler {
		return nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
			attrs := []slog.Attr{
				slog.String("session", in.SessionID), slog.String("node", nodeID(in)),
				slog.String("type", in.Type), slog.Int("attempt", in.Attempt),
			}
			if c, ok := nodes.CallerFrom(ctx); ok {
				if c.Tenant != "" {
					attrs = append(attrs, slog.String("tenant", c.Tenant))
				}
				if c.User != "" {
					attrs = append(attrs, slog.String("user", c.User))
				}
				if c.Trace != "" {
					attrs = append(attrs, slog.String("trace", c.Trace))
				}
			}
			l.LogAttrs(ctx, slog.LevelDebug, "node started", attrs...)
			start := cfg.clk.Now()
			o, err := next.Handle(ctx, in)
			attrs = append(attrs, slog.Duration("duration", cfg.clk.Now().Sub(start)))
			level := slog.LevelInfo
			switch {
			case err != nil:
				level = slog.LevelWarn
				attrs = append(attrs, slog.String("status", string(nodes.StatusFail)), slog.String("error", err.Error()))
			case o == nil:
				level = slog.LevelWarn
				attrs = append(attrs, slog.String("status", string(nodes.StatusFail)), slog.String("error", "no outcome"))
			default:
				attrs = append(attrs, slog.String("status", string(o.Status)))
				if o.Status == nodes.StatusFail {
					level = slog.LevelWarn
					attrs = append(attrs, slog.String("error", o.FailureReason))
				}
				if u := o.Usage; u != (nodes.Usage{}) {
					attrs = append(attrs, slog.Int64("input_tokens", u.InputTokens),
						slog.Int64("output_tokens", u.OutputTokens), slog.Float64("cost", u.Cost))
				}
			}
			l.LogAttrs(ctx, level, "node finished", attrs...)
			return o, err
		})
	}
}

func nodeID(in *nodes.Input) string {
	if in.Node == nil {
		return ""
	}
	return in.Node.ID
}
