package nodes

// Middleware wraps a handler: logging, timeouts, retries, recovery.
type Middleware func(Handler) Handler

// Chain wraps h with mws; the first middleware is the outermost.
func Chain(h Handler, mws ...Middleware) Handler {
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i](h)
	}
	return h
}
