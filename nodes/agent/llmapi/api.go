package llmapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/nodes/agent"
)

// Options configures the API providers. The zero value is usable: keys and
// base URLs come from the vendors' standard environment variables.
type Options struct {
	// Prices prices each run's tokens (nil = agent.DefaultPrices()).
	Prices agent.Prices
	// Roles resolves Request.Role to system instructions
	// (nil = agent.BuiltinRoles()).
	Roles map[string]agent.Role
	// Model is the model of requests that name none ("" = the provider's
	// DefaultModel).
	Model string
	// MaxTokens caps each answer when the node sets no max_tokens
	// (0 = DefaultMaxTokens for Anthropic, which requires a cap; the
	// server's own limit for the others).
	MaxTokens int64
	// HTTPClient sends the requests (nil = a client of its own without an
	// overall timeout: the run's context bounds each request).
	HTTPClient *http.Client
	// Clock reads the time an HTTP-date Retry-After is relative to
	// (nil = the real clock).
	Clock clock.Clock
	// LookupEnv reads the environment (nil = os.LookupEnv); tests inject
	// one instead of changing the process's environment.
	LookupEnv func(key string) (string, bool)
}

// The default models, used when neither the node (llm_model) nor the
// options name one.
const (
	DefaultOpenAIModel    = "gpt-5"
	DefaultAnthropicModel = "claude-sonnet-4-5"
	DefaultGeminiModel    = "gemini-2.5-flash"
)

// DefaultMaxTokens caps an Anthropic answer when nothing else does (the
// Messages API requires a cap).
const DefaultMaxTokens = 8192

// Names are the provider names Register registers.
var Names = []string{"openai", "anthropic", "gemini"}

// Register adds the API providers (openai, anthropic, gemini) to r, each
// configured with opts. Registering never fails: a missing key is
// reported by each provider's Check, and by a run.
func Register(r *agent.Registry, opts Options) {
	r.Register("openai", NewOpenAI(opts))
	r.Register("anthropic", NewAnthropic(opts))
	r.Register("gemini", NewGemini(opts))
}

// base is what the API providers share: options, environment, the HTTP
// client that notes each response's status and Retry-After, and building
// results, events and errors.
type base struct {
	name  string
	creds credentials
	opts  Options
	http  *http.Client
}

// credentials names a provider's environment: the variables holding its
// key and its base URL, first set wins, and what Check says when neither
// is set.
type credentials struct {
	key, baseURL []string
	missing      string
}

func newBase(name string, creds credentials, opts Options) base {
	if opts.Prices == nil {
		opts.Prices = agent.DefaultPrices()
	}
	if opts.Roles == nil {
		opts.Roles = agent.BuiltinRoles()
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real()
	}
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	rt := hc.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	c := *hc
	c.Transport = noteTransport{base: rt, clk: opts.Clock}
	return base{name: name, creds: creds, opts: opts, http: &c}
}

// Name is the provider's registered name.
func (b *base) Name() string { return b.name }

// Check reports a missing key: one of the provider's key variables must
// be set, unless a base URL variable names another server (a local one
// may need no key).
func (b *base) Check(context.Context) error {
	key, _ := b.env(b.creds.key...)
	baseURL, _ := b.env(b.creds.baseURL...)
	if key == "" && baseURL == "" {
		return &agent.Error{Provider: b.name, Class: agent.ClassAuth, Msg: "auth: " + b.creds.missing}
	}
	return nil
}

// env returns the first of keys set to a non-empty value, and its name.
func (b *base) env(keys ...string) (value, key string) {
	for _, k := range keys {
		if v, ok := b.opts.LookupEnv(k); ok && strings.TrimSpace(v) != "" {
			return strings.TrimSpace(v), k
		}
	}
	return "", ""
}

// system is the request's system instructions: its role's, then its own.
func (b *base) system(req *agent.Request) (string, error) {
	var parts []string
	if req.Role != "" {
		r, ok := b.opts.Roles[req.Role]
		if !ok {
			names := make([]string, 0, len(b.opts.Roles))
			for n := range b.opts.Roles {
				names = append(names, n)
			}
			sort.Strings(names)
			return "", &agent.Error{Provider: b.name, Class: agent.ClassBadRequest,
				Msg: fmt.Sprintf("%s: unknown role %q (known: %s)", agent.ClassBadRequest, req.Role, strings.Join(names, ", "))}
		}
		parts = append(parts, r.System)
	}
	if req.System != "" {
		parts = append(parts, req.System)
	}
	return strings.Join(parts, "\n\n"), nil
}

// model is the model a request runs on.
func (b *base) model(req *agent.Request, def string) string {
	switch {
	case req.Model != "":
		return req.Model
	case b.opts.Model != "":
		return b.opts.Model
	}
	return def
}

// maxTokens is the node's max_tokens, else the options', else def (0 =
// no cap sent). A max_tokens that is not a positive integer is an error.
func (b *base) maxTokens(req *agent.Request, def int64) (int64, error) {
	if s := strings.TrimSpace(req.Attrs["max_tokens"]); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			return 0, &agent.Error{Provider: b.name, Class: agent.ClassBadRequest,
				Msg: fmt.Sprintf("%s: max_tokens=%q is not a positive integer", agent.ClassBadRequest, s)}
		}
		return n, nil
	}
	if b.opts.MaxTokens > 0 {
		return b.opts.MaxTokens, nil
	}
	return def, nil
}

// run is one request in flight: what the transport noted, the streamed
// text, and the emit function.
type run struct {
	b       *base
	note    *httpNote
	onEvent func(agent.Event)
	text    strings.Builder
	notes   []string
}

// call is what a request asks of the API, resolved: the system
// instructions, the model and the answer's cap (0 = none sent).
type call struct {
	system, model string
	maxTokens     int64
}

// start begins a run of req: a done context ends it at once, and the
// context carries the note the transport fills. defModel and defMax are
// the provider's defaults (see model and maxTokens).
func (b *base) start(ctx context.Context, req *agent.Request, onEvent func(agent.Event), defModel string, defMax int64) (context.Context, *run, call, error) {
	if err := ctx.Err(); err != nil {
		return ctx, nil, call{}, fmt.Errorf("%s: %w", b.name, err)
	}
	system, err := b.system(req)
	if err != nil {
		return ctx, nil, call{}, err
	}
	maxTokens, err := b.maxTokens(req, defMax)
	if err != nil {
		return ctx, nil, call{}, err
	}
	r := &run{b: b, note: &httpNote{}, onEvent: onEvent}
	return context.WithValue(ctx, noteKey{}, r.note), r, call{system: system, model: b.model(req, defModel), maxTokens: maxTokens}, nil
}

// delta streams a piece of the answer.
func (r *run) delta(s string) {
	if s == "" {
		return
	}
	r.text.WriteString(s)
	if r.onEvent != nil {
		r.onEvent(agent.Event{Kind: "text", Text: s})
	}
}

// result prices the run's tokens, reports them as one usage event and
// builds the result. input counts every input token, cached those read
// from a prompt cache.
func (r *run) result(model string, input, cached, output int64, sessionID string) *agent.Result {
	u := agent.Usage{InputTokens: input, OutputTokens: output}
	if cost, ok := r.b.opts.Prices.Cost(model, input, cached, output); ok {
		u.Cost = cost
	} else if input+output > 0 {
		r.notes = append(r.notes, fmt.Sprintf("cost unknown: no price for model %q", model))
	}
	if r.onEvent != nil && (u.InputTokens != 0 || u.OutputTokens != 0 || u.Cost != 0) {
		r.onEvent(agent.Event{Kind: "usage", Usage: u})
	}
	return &agent.Result{Text: r.text.String(), Success: true, Usage: u, SessionID: sessionID,
		Notes: strings.Join(r.notes, "; ")}
}

// fail turns an error of the SDK (or a failure the stream reported) into
// the run's error: ctx's own error when the run was cancelled, else a
// classified *agent.Error — by the HTTP status of the failed response,
// else by the message — with the server's Retry-After.
func (r *run) fail(ctx context.Context, err error, retryAfter time.Duration) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("%s: %w", r.b.name, ctxErr)
	}
	status, noted := r.note.get()
	if retryAfter == 0 {
		retryAfter = noted
	}
	msg := strings.TrimSpace(err.Error())
	class := agent.ClassifyStatus(status)
	if class == agent.ClassUnknown {
		class = agent.ClassifyMessage(msg)
	}
	if class == agent.ClassUnknown && isNetErr(err) {
		class = agent.ClassNetwork
	}
	if len(msg) > 2000 {
		msg = msg[:2000] + "…"
	}
	return &agent.Error{Provider: r.b.name, Class: class, Retryable: class.Retryable(),
		Msg: fmt.Sprintf("%s: %s", class, msg), Err: err, RetryAfter: retryAfter}
}

// streamFailure is a failure the server reported inside a stream that had
// started well (an SSE error event, a failed response).
type streamFailure struct{ msg string }

func (e *streamFailure) Error() string { return e.msg }

// isNetErr reports errors of the connection rather than of the server.
func isNetErr(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne)
}

// noteKey is the context key of a run's httpNote.
type noteKey struct{}

// httpNote is what the transport saw of a run's last HTTP response.
type httpNote struct {
	mu         sync.Mutex
	status     int
	retryAfter time.Duration
}

func (n *httpNote) set(status int, retryAfter time.Duration) {
	n.mu.Lock()
	n.status, n.retryAfter = status, retryAfter
	n.mu.Unlock()
}

func (n *httpNote) get() (int, time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.status, n.retryAfter
}

// noteTransport records the status and Retry-After of each response in
// the request context's httpNote, so that an error can be classified by
// its status and retried after the delay the server asked for, whatever
// SDK made the request.
type noteTransport struct {
	base http.RoundTripper
	clk  clock.Clock
}

func (t noteTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err == nil {
		if n, ok := req.Context().Value(noteKey{}).(*httpNote); ok {
			n.set(resp.StatusCode, RetryAfter(resp.Header, t.clk.Now()))
		}
	}
	return resp, err
}

// maxRetryAfter caps the delay a server may ask for: a longer one is
// taken as this (the node's timeout and budgets still apply).
const maxRetryAfter = 10 * time.Minute

// RetryAfter reads the delay a response asks for before a retry:
// retry-after-ms (milliseconds, sent by OpenAI and Anthropic), else
// Retry-After in seconds or as an HTTP date (relative to now). 0 when
// there is none or it cannot be read; at most ten minutes.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	var d time.Duration
	if s := strings.TrimSpace(h.Get("Retry-After-Ms")); s != "" {
		if ms, err := strconv.ParseFloat(s, 64); err == nil && ms > 0 {
			d = time.Duration(ms * float64(time.Millisecond))
		}
	}
	if s := strings.TrimSpace(h.Get("Retry-After")); d == 0 && s != "" {
		if secs, err := strconv.ParseFloat(s, 64); err == nil {
			if secs > 0 {
				d = time.Duration(secs * float64(time.Second))
			}
		} else if t, err := http.ParseTime(s); err == nil && t.After(now) {
			d = t.Sub(now)
		}
	}
	return min(d, maxRetryAfter)
}
