package agent

import (
	"context"
	"errors"
	"time"
)

// Usage is what one agent run consumed.
type Usage struct {
	InputTokens  int64
	OutputTokens int64
	Cost         float64 // in US dollars
}

// Add returns u+o.
func (u Usage) Add(o Usage) Usage {
	return Usage{u.InputTokens + o.InputTokens, u.OutputTokens + o.OutputTokens, u.Cost + o.Cost}
}

// Request is one agent run.
type Request struct {
	SessionID       string
	NodeID          string
	Prompt          string
	System          string // system instructions (role template)
	Provider        string
	Model           string
	ReasoningEffort string // low, medium, high
	WorkDir         string // working directory of the agent
	StageDir        string // {logs}/{node}: where the agent may write status.json
	ThreadID        string // thread to resume under fidelity "full" ("" = new)
	ResumeSession   string // the CLI's own session id to resume ("" = new)
	Fidelity        string
	Role            string
	Permissions     []string // allowed capabilities, provider-specific mapping
	AttemptID       string   // stable idempotency key across crash replays
	Attrs           map[string]string
}

// Event is one streamed piece of a run: partial text, a tool call, usage.
type Event struct {
	Kind  string // "text", "tool_call", "usage", "status"
	Text  string
	Tool  string
	Usage Usage
}

// Result is the outcome of one agent run.
type Result struct {
	Text      string
	Success   bool
	Usage     Usage
	SessionID string // the CLI's session id, for resuming the thread
	ToolCalls []string
	// Status is the outcome the agent asked for explicitly (from a
	// status.json or a provider-specific field), "" when it did not.
	// The fields below are the rest of such an explicit outcome.
	Status           string
	PreferredLabel   string
	SuggestedNextIDs []string
	ContextUpdates   map[string]string
	Notes            string
}

// Provider runs agents. Run is called from a handler goroutine, must honour
// ctx (cancel kills the agent and its process group) and may call onEvent
// from the calling goroutine only. Implementations are safe for concurrent
// use by several nodes.
type Provider interface {
	Name() string
	Run(ctx context.Context, req *Request, onEvent func(Event)) (*Result, error)
}

// Checker is implemented by providers that can verify, before a session
// starts, that they can run (the CLI executable exists...).
type Checker interface {
	Check(ctx context.Context) error
}

// Error categories of the spec: a retryable error is retried under the
// node's retry policy; a terminal one fails the node at once.
var (
	ErrRetryable = errors.New("agent: retryable error")
	ErrTerminal  = errors.New("agent: terminal error")
)

// Error is a classified provider error.
type Error struct {
	Provider  string
	Retryable bool
	Msg       string
	Err       error
	// Class is the error's category (ClassRateLimit...), "" when the
	// provider did not classify it.
	Class Class
	// RetryAfter is how long the server asked to wait before trying again
	// (an HTTP Retry-After, a Gemini RetryInfo), 0 when it did not say.
	// The node's retry waits at least this long.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	if e.Provider != "" {
		return e.Provider + ": " + e.Msg
	}
	return e.Msg
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is matches ErrRetryable or ErrTerminal by category.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrRetryable:
		return e.Retryable
	case ErrTerminal:
		return !e.Retryable
	}
	return false
}
