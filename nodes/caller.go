package nodes

import "context"

// Caller is the request context of whoever started a piece of work: the
// tenant and user it is done for, a trace id, and custom keys. A caller set
// on the context given to a session (or in its configuration) reaches every
// node of the session, across processes: the runtime carries it with every
// envelope and gives it to each handler's context.
type Caller struct {
	Tenant string
	User   string
	Trace  string
	// Values holds custom keys (names are case-insensitive on the wire).
	Values map[string]string
}

// IsZero reports whether c carries nothing.
func (c Caller) IsZero() bool {
	return c.Tenant == "" && c.User == "" && c.Trace == "" && len(c.Values) == 0
}

type callerKey struct{}

// WithCaller returns a context carrying c.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the caller ctx carries.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok && !c.IsZero()
}
