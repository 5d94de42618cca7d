package switchyard

import (
	"context"
	"log/slog"
	"time"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/nodes/agent"
	"github.com/switchyard/switchyard/session"
)

// CheckpointPolicy says when a session writes its checkpoint (every N
// nodes, every N seconds, on error; the zero value after every envelope)
// and whether a successful session's checkpoint is kept.
type CheckpointPolicy = session.CheckpointPolicy

// Question and Answer are what a human gate asks and what a person replies.
type (
	Question = nodes.Question
	Answer   = nodes.Answer
)

// AnswerFunc answers human gates from Go.
type AnswerFunc func(ctx context.Context, q *Question) (*Answer, error)

type answerFunc AnswerFunc

func (f answerFunc) Ask(ctx context.Context, q *Question) (*Answer, error) { return f(ctx, q) }

// Option configures Run, Stream and Resume.
type Option func(*runConfig)

type runConfig struct {
	broker      *broker.Broker
	dataDir     string
	id          string
	mws         []Middleware
	hooks       Hooks
	checkpoint  *CheckpointPolicy
	ephemeral   bool
	interviewer nodes.Interviewer
	providers   map[string]agent.Provider
	defProvider string
	logger      *slog.Logger
	clk         clock.Clock
	logsDir     string
	workDir     string
	context     map[string]string
	caller      nodes.Caller
	backoff     func(int) time.Duration
	events      int
}

// WithBroker runs the session on b (an embedded server or a connection to
// a NATS cluster) instead of a private embedded server. b stays open.
func WithBroker(b *broker.Broker) Option { return func(c *runConfig) { c.broker = b } }

// WithDataDir keeps the private embedded server's store (checkpoints,
// envelopes, artifacts) in dir, so a session can be resumed by a later
// Resume in this or another process. Without it the store is in memory
// and goes with the run.
func WithDataDir(dir string) Option { return func(c *runConfig) { c.dataDir = dir } }

// WithSessionID names the session (default: a fresh id).
func WithSessionID(id string) Option { return func(c *runConfig) { c.id = id } }

// WithMiddleware wraps every node's handler (Go nodes and DOT-style ones),
// the first outermost; per-node middleware (Use) runs inside.
func WithMiddleware(mws ...Middleware) Option {
	return func(c *runConfig) { c.mws = append(c.mws, mws...) }
}

// WithHooks calls hooks as the session goes.
func WithHooks(h Hooks) Option { return func(c *runConfig) { c.hooks = h } }

// WithCheckpoint sets the checkpoint policy (default: after every envelope,
// removed when the session succeeds).
func WithCheckpoint(p CheckpointPolicy) Option { return func(c *runConfig) { c.checkpoint = &p } }

// WithoutCheckpoints runs the session on core NATS with no checkpoint: the
// fastest, and nothing to resume.
func WithoutCheckpoints() Option { return func(c *runConfig) { c.ephemeral = true } }

// WithInterviewer answers human gates (nodes.NewQueue, nodes.AutoApprove,
// nodes.Console...). Without one, gates wait for answers on the session's
// control subject (switchyard answer, Execution.Answer).
func WithInterviewer(iv nodes.Interviewer) Option { return func(c *runConfig) { c.interviewer = iv } }

// WithAnswers answers human gates from Go: f is called for each question.
func WithAnswers(f AnswerFunc) Option {
	return func(c *runConfig) { c.interviewer = answerFunc(f) }
}

// WithProvider adds an agent provider for DOT-style agent nodes
// (prompt=...). The CLI providers (claude, codex, gemini-cli, command) and
// "mock" are there already.
func WithProvider(name string, p agent.Provider) Option {
	return func(c *runConfig) {
		if c.providers == nil {
			c.providers = map[string]agent.Provider{}
		}
		c.providers[name] = p
	}
}

// WithDefaultProvider is the provider of agent nodes that name none
// (default "mock").
func WithDefaultProvider(name string) Option { return func(c *runConfig) { c.defProvider = name } }

// WithLogger receives the runtime's log.
func WithLogger(l *slog.Logger) Option { return func(c *runConfig) { c.logger = l } }

// WithClock runs the session's time (timeouts, budgets, cron, stall) on
// clk.
func WithClock(clk clock.Clock) Option { return func(c *runConfig) { c.clk = clk } }

// WithLogsDir keeps a run directory (prompt.md, response.md, status.json
// per node) in dir.
func WithLogsDir(dir string) Option { return func(c *runConfig) { c.logsDir = dir } }

// WithWorkDir is where tools and agents run.
func WithWorkDir(dir string) Option { return func(c *runConfig) { c.workDir = dir } }

// WithContext seeds the state with keys.
func WithContext(kv map[string]string) Option { return func(c *runConfig) { c.context = kv } }

// WithCaller sets the caller (tenant, user, trace, custom keys); default:
// the one of the context given to Run (nodes.WithCaller).
func WithCaller(cl Caller) Option { return func(c *runConfig) { c.caller = cl } }

// WithBackoff replaces the delay between engine retries.
func WithBackoff(f func(n int) time.Duration) Option { return func(c *runConfig) { c.backoff = f } }

// Hooks are called as a session goes, on the session's event goroutine:
// they must not block for long.
type Hooks struct {
	// OnStart is called when the session starts (or resumes).
	OnStart func(Event)
	// OnNode is called after every node visit (node.completed).
	OnNode func(Event)
	// OnError is called for every node visit that failed and for a session
	// that ends in failure.
	OnError func(Event)
	// OnEvent is called for every event.
	OnEvent func(Event)
	// OnFinish is called once with the final report.
	OnFinish func(*Report)
}
