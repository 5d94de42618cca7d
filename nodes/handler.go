package nodes

import (
	"context"
	"strings"
	"time"

	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/nodes/agent"
)

// Status is a node outcome status. The five spec statuses are constants;
// agents may report custom values (DESIGN decision 7), kept verbatim.
type Status string

// The spec's statuses.
const (
	StatusSuccess Status = "success"
	StatusFail    Status = "fail"
	StatusPartial Status = "partial_success"
	StatusRetry   Status = "retry"
	StatusSkipped Status = "skipped"
)

// ParseStatus normalises a status written by a person or an agent: it is
// lowercased and trimmed; "pass" and "ok" read as success, "failure" and
// "error" as fail, "partial" as partial_success. Other values are custom.
func ParseStatus(s string) Status {
	s = strings.ToLower(strings.TrimSpace(s))
	switch s {
	case "pass", "passed", "ok", "succeeded":
		return StatusSuccess
	case "failure", "failed", "error":
		return StatusFail
	case "partial":
		return StatusPartial
	}
	return Status(s)
}

// IsSuccess reports whether s counts as success for goal gates and retries:
// success, partial_success and custom values (DESIGN decision 7).
func (s Status) IsSuccess() bool {
	switch s {
	case StatusFail, StatusRetry, StatusSkipped, "":
		return false
	}
	return true
}

// Usage is what a node's work consumed.
type Usage = agent.Usage

// Outcome is the result of one handler run.
type Outcome struct {
	Status           Status
	PreferredLabel   string
	SuggestedNextIDs []string
	ContextUpdates   map[string]string
	Notes            string
	FailureReason    string
	// Response is the node's output text: response.md, and the message of
	// the envelopes it sends downstream.
	Response string
	Usage    Usage
	// Retryable marks a failure caused by a transient error (rate limit,
	// network, 5xx); such failures are retried up to max_retries.
	Retryable bool
	// RetryAfter is the least delay before a retry of a Retryable failure
	// (the server's Retry-After); the retry waits for the longer of it and
	// the node's backoff.
	RetryAfter time.Duration
	// Continue keeps the node working instead of routing its outcome:
	// ContinueTick fires it again with a tick (auto mode), ContinueWait
	// waits for its next input (an interactive conversation). The outcome's
	// context updates are kept; nothing goes downstream until an outcome
	// without Continue.
	Continue Continuation
	// Metadata is what the node adds to the metadata every later node sees:
	// the runtime merges it over Input.Metadata (these keys win) into every
	// envelope the node sends.
	Metadata map[string]string
}

// Continuation says how a node that is not done goes on.
type Continuation string

// Continuations.
const (
	// ContinueTick fires the node again with a tick envelope (kind tick)
	// as soon as the scheduler admits it.
	ContinueTick Continuation = "tick"
	// ContinueWait leaves the node waiting for its next input.
	ContinueWait Continuation = "wait"
)

// ThreadKeyPrefix starts the context keys under which handlers keep agent
// threads (internal.thread.<name> = the CLI's session id). A node remembers
// the ones it set and finds them in the context of its later firings,
// whatever envelope fires it.
const ThreadKeyPrefix = "internal.thread."

// Notes kept beside a thread's key: the provider whose session it is, and
// "1" when the session is from before a resume (the agent starts afresh).
const (
	ThreadProviderSuffix = ".provider"
	ThreadStaleSuffix    = ".stale"
)

// Message is one envelope that fired the node, as a handler sees it.
type Message struct {
	ID         string
	Kind       string // handoff, tick, event, human_answer, control
	From       string // upstream node ("" for outside input)
	Edge       string // edge id ("" for inbox input)
	Text       string
	Structured map[string]any
	// Status is the outcome of the node that sent the message.
	Status Status
	// Response is that node's output text.
	Response string
	// Branch is the parallel branch the message comes from (its first
	// node), "" outside parallel branches.
	Branch string
	// Updates are the context keys the branch set since its fork.
	Updates map[string]string
	// Artifacts are the files the message carries (payload.artifacts).
	Artifacts []Artifact
}

// Artifact is a file an envelope carries by reference: in a durable
// session, an object of the session's object store, checked by sha256.
type Artifact struct {
	Name   string
	Type   string // file, response...
	Ref    string // obj://<bucket>/<name>, or file://, http://...
	SHA256 string
	Size   int64
	// Path is where the runtime put a copy for the handler:
	// {stage}/inputs/<name> ("" when it could not, e.g. no run directory).
	Path string
}

// Input is everything a handler may read. It is owned by the runtime and
// must not be retained after Handle returns.
type Input struct {
	SessionID string
	Graph     *graph.Graph
	Node      *graph.Node
	Type      string            // the resolved handler type
	Context   map[string]string // a read-only snapshot of the run context
	Messages  []Message         // the envelopes that fired this run
	Prompt    string            // the node prompt with $goal expanded ("" when none)
	LogsDir   string            // the run's logs root
	StageDir  string            // {logs}/{node}: prompt.md, response.md, status.json
	WorkDir   string            // working directory for tools and agents
	Attempt   int               // 1-based attempt number within this visit
	AttemptID string            // stable idempotency key for this attempt
	// Metadata is the metadata the node's input carries: the session
	// input's, merged with what every earlier node on the way added (later
	// keys win; with several input envelopes, later arrivals win). Read-only.
	Metadata map[string]string
	// Emit publishes a progress event for this node (may be nil).
	Emit func(kind string, fields map[string]any)
	// OnUsage reports usage as it happens (each call adds to the run's
	// usage; may be nil). A budget it crosses cancels ctx. The Outcome's
	// Usage is the run's total, including what was reported here; a
	// report that comes after the node's outcome was taken charges
	// nothing.
	OnUsage func(Usage)
}

// Handler runs one node. Handle is called by the node's actor on a goroutine
// of its own (never the actor's), may take minutes, and must honour
// ctx.Done(): the context carries the node's timeout and budget, and is
// cancelled when the session stops. It must not retain in. A returned error
// is a failure of the node (classified retryable when it wraps
// agent.ErrRetryable); a panic is recovered by the runtime and fails the node.
type Handler interface {
	Handle(ctx context.Context, in *Input) (*Outcome, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, in *Input) (*Outcome, error)

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, in *Input) (*Outcome, error) { return f(ctx, in) }

// Inliner is implemented by handlers that never block for some nodes — no
// I/O, no waiting, no heavy work: the runtime runs them on the node's actor
// goroutine instead of handing each firing to the node's handler goroutine
// and back. A handler that may block must say false: the node could not
// be cancelled meanwhile.
type Inliner interface {
	Inline(n *graph.Node) bool
}

// Pure is implemented by handlers whose firing of some nodes has no effect
// outside the session: its outcome follows from its input, the context and
// the graph alone, and running it again repeats nothing. A durable session
// does not wait for the record of such a firing before its outputs go out
// (when none of its inputs came from the session's work stream): the
// record is written with the next one that is waited for, and a crash
// before that runs the firing again — which its middleware sees, as it
// sees any firing a crash interrupted.
type Pure interface {
	Pure(n *graph.Node) bool
}

// InlineFunc adapts a function that never blocks to Handler (and Inliner).
type InlineFunc func(ctx context.Context, in *Input) (*Outcome, error)

// Handle calls f.
func (f InlineFunc) Handle(ctx context.Context, in *Input) (*Outcome, error) { return f(ctx, in) }

// Inline reports true.
func (InlineFunc) Inline(*graph.Node) bool { return true }
