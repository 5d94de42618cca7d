package switchyard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/nodes/agent"
)

// Message is what flows between Go nodes: text and metadata.
type Message struct {
	Text     string
	Metadata map[string]string
}

// Agent is a Go agent: it turns an input message into a reply. The reply's
// metadata is merged over the input's and reaches every later node. An
// error fails the node (retried when it wraps Retryable, or under the
// node's OnError policy). Run is called on a goroutine of the runtime and
// must honour ctx.
type Agent interface {
	Run(ctx context.Context, in Message) (Message, error)
}

// AgentFunc adapts a function to Agent.
type AgentFunc func(ctx context.Context, in Message) (Message, error)

// Run calls f.
func (f AgentFunc) Run(ctx context.Context, in Message) (Message, error) { return f(ctx, in) }

// Tool is a Go tool: it is called with parameters a ParamMapper built from
// the state, and its result (a string, []byte, or anything JSON encodes)
// becomes the node's output.
type Tool interface {
	Call(ctx context.Context, params map[string]any) (any, error)
}

// ToolFunc adapts a function to Tool.
type ToolFunc func(ctx context.Context, params map[string]any) (any, error)

// Call calls f.
func (f ToolFunc) Call(ctx context.Context, params map[string]any) (any, error) {
	return f(ctx, params)
}

// ParamMapper builds a tool's parameters from the state (State.Messages
// has the envelopes that fired the node). A nil mapper passes
// {"input": <the node's input>, "messages": [{id, kind, from, edge, text,
// structured}...]}.
type ParamMapper func(s State) (map[string]any, error)

// Transform builds an output node's result from the state. A nil
// transform passes the last output (state "_previous") through.
type Transform func(s State) (Message, error)

// Handler, Input, Outcome and Middleware are the runtime's: custom nodes
// implement Handler exactly as the built-in ones do.
type (
	Handler     = nodes.Handler
	HandlerFunc = nodes.HandlerFunc
	Input       = nodes.Input
	Outcome     = nodes.Outcome
	Middleware  = nodes.Middleware
	Caller      = nodes.Caller
	Usage       = nodes.Usage
)

// State keys the runtime maintains.
const (
	// KeyPrevious holds the last output of any node.
	KeyPrevious = "_previous"
	// KeyInput holds the session input's text.
	KeyInput = "_input"
)

// State is a read-only view of a session's state at one node: node outputs
// by node id, "_previous", "_input", and the rest of the run context
// ("outcome", "graph.goal", keys handlers set); and the messages (the
// envelopes) that fired the node, from Messages.
type State struct {
	m    map[string]string
	live *liveState // a node run's context, lent (m is then unused)
	msgs []nodes.Message
}

// liveState lends a node run's context to its State without copying it:
// while the run lasts the state reads the runtime's map (which nothing
// changes then); when the run returns, the map is copied if the state was
// handed out (StateFrom), because Go code may keep it and the runtime goes
// on changing the map. A run whose code never asked for its state costs no
// copy of a context that grows with the run.
// The messages that fired the run are lent the same way.
type liveState struct {
	mu     sync.Mutex
	m      map[string]string
	msgs   []nodes.Message
	lent   bool
	sealed bool
}

// end is called when the run returned.
func (l *liveState) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lent {
		l.m = maps.Clone(l.m)
		l.msgs = slices.Clone(l.msgs)
	} else {
		l.m, l.msgs = nil, nil // nobody asked during the run
	}
	l.sealed = true
}

// messages is the state's messages; never changed after they are
// returned.
func (s State) messages() []nodes.Message {
	if s.live == nil {
		return s.msgs
	}
	s.live.mu.Lock()
	defer s.live.mu.Unlock()
	return s.live.msgs
}

// view is the state's map; never changed after it is returned.
func (s State) view() map[string]string {
	if s.live == nil {
		return s.m
	}
	s.live.mu.Lock()
	defer s.live.mu.Unlock()
	return s.live.m
}

// Received is one envelope that fired a node: its id, kind, sender (From,
// "" for outside input), edge, text and structured payload.
type Received = nodes.Message

// NewState returns a state holding m (copied), for tests of mappers and
// transforms.
func NewState(m map[string]string) State { return State{m: maps.Clone(m)} }

// Get returns the value of key ("" when unset).
func (s State) Get(key string) string { return s.view()[key] }

// Lookup returns the value of key and whether it is set.
func (s State) Lookup(key string) (string, bool) {
	v, ok := s.view()[key]
	return v, ok
}

// Output returns the output of a node ("" when it produced none).
func (s State) Output(node string) string { return s.view()[node] }

// Previous returns the last output of any node ("" before the first).
func (s State) Previous() string { return s.view()[KeyPrevious] }

// Input returns the session input's text.
func (s State) Input() string { return s.view()[KeyInput] }

// Messages returns the envelopes that fired the node, in arrival order
// (several when a join, a schedule or a busy node took more than one).
func (s State) Messages() []Received { return slices.Clone(s.messages()) }

// Keys returns the state's keys in order.
func (s State) Keys() []string { return slices.Sorted(maps.Keys(s.view())) }

type stateKey struct{}

// StateFrom returns the state of the node a Go agent, tool or handler runs
// for (empty outside a node run). The state may be kept after the run;
// asked for only once the run has returned, it is empty.
func StateFrom(ctx context.Context) State {
	s, _ := ctx.Value(stateKey{}).(State)
	if l := s.live; l != nil {
		l.mu.Lock()
		if !l.sealed {
			l.lent = true
		}
		l.mu.Unlock()
	}
	return s
}

// stateCtx is a node run's context with its state: the context and the
// lent state in one allocation (a context.WithValue, the State it holds
// and the liveState were three, and a copy of the messages a fourth).
type stateCtx struct {
	context.Context
	live liveState
}

// withState is ctx with a node run's state: its context m and messages
// msgs, lent for the run (liveState); call end on the result's live when
// the run returned.
func withState(ctx context.Context, m map[string]string, msgs []nodes.Message) *stateCtx {
	return &stateCtx{Context: ctx, live: liveState{m: m, msgs: msgs}}
}

// Value is the run's State for stateKey, else ctx's value.
func (c *stateCtx) Value(key any) any {
	if _, ok := key.(stateKey); ok {
		return State{live: &c.live}
	}
	return c.Context.Value(key)
}

// Retryable marks err as transient: the node is retried up to its
// max_retries (OnError(Retry(n))).
func Retryable(err error) error {
	if err == nil {
		return nil
	}
	return &agent.Error{Retryable: true, Msg: err.Error(), Err: err}
}

// nodeInput is the input of a Go agent or tool node: its input_key's
// value; else, in a reactive session (kind="session"), the text of the
// envelopes that fired it (nodes.InputText: in arrival order, joined by a
// blank line) when they have any; else the last output, else the session
// input.
func nodeInput(in *nodes.Input) string {
	if k := in.Node.Attrs.String("input_key"); k != "" {
		return in.Context[k]
	}
	if in.Graph != nil && in.Graph.Kind() == "session" {
		if t := nodes.InputText(in.Messages); t != "" {
			return t
		}
	}
	if v, ok := in.Context[KeyPrevious]; ok {
		return v
	}
	return in.Context[KeyInput]
}

// failure turns an error of Go code into a failed outcome.
func failure(err error) *nodes.Outcome {
	return &nodes.Outcome{Status: nodes.StatusFail, FailureReason: err.Error(), Retryable: errors.Is(err, agent.ErrRetryable)}
}

// agentHandler runs an Agent.
type agentHandler struct{ a Agent }

func (h agentHandler) Handle(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
	reply, err := h.a.Run(ctx, Message{Text: nodeInput(in), Metadata: maps.Clone(in.Metadata)})
	if err != nil {
		return failure(err), nil
	}
	return &nodes.Outcome{Status: nodes.StatusSuccess, Response: reply.Text, Metadata: reply.Metadata}, nil
}

// toolHandler calls a Tool with the parameters its mapper builds.
type toolHandler struct {
	t      Tool
	mapper ParamMapper
}

func (h toolHandler) Handle(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
	var params map[string]any
	if h.mapper == nil {
		params = map[string]any{"input": nodeInput(in), "messages": nodes.InputMessages(in.Messages)}
	} else {
		var err error
		if params, err = h.mapper(State{m: in.Context, msgs: in.Messages}); err != nil {
			return failure(fmt.Errorf("parameters: %w", err)), nil
		}
	}
	res, err := h.t.Call(ctx, params)
	if err != nil {
		return failure(err), nil
	}
	text, err := resultText(res)
	if err != nil {
		return failure(fmt.Errorf("result: %w", err)), nil
	}
	return &nodes.Outcome{Status: nodes.StatusSuccess, Response: text}, nil
}

func resultText(v any) (string, error) {
	switch r := v.(type) {
	case nil:
		return "", nil
	case string:
		return r, nil
	case []byte:
		return string(r), nil
	case fmt.Stringer:
		return r.String(), nil
	}
	b, err := json.Marshal(v)
	return string(b), err
}

// outputHandler builds the result.
type outputHandler struct{ f Transform }

func (h outputHandler) Handle(_ context.Context, in *nodes.Input) (*nodes.Outcome, error) {
	if h.f == nil {
		return &nodes.Outcome{Status: nodes.StatusSuccess, Response: in.Context[KeyPrevious]}, nil
	}
	msg, err := h.f(State{m: in.Context, msgs: in.Messages})
	if err != nil {
		return failure(err), nil
	}
	return &nodes.Outcome{Status: nodes.StatusSuccess, Response: msg.Text, Metadata: msg.Metadata}, nil
}
