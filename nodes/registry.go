package nodes

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"

	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/nodes/agent"
)

// ErrInvalidType is returned for an empty or malformed handler type.
var ErrInvalidType = errors.New("nodes: invalid handler type")

// ErrDuplicate is returned by Register for a type already registered; use
// Replace to replace it deliberately.
var ErrDuplicate = errors.New("nodes: handler type already registered")

// Info describes a handler type.
type Info struct {
	// Type is the dotted id nodes name with `type=` or through the shape
	// table: letters, digits and underscores, in dot-separated segments.
	Type string
	// Handler runs the type's nodes; it is shared by every node of the
	// type and must be safe for concurrent use.
	Handler Handler
	// New builds the handler when Handler is nil; it is called once, at
	// registration.
	New func() Handler
	// Doc is a one-line description (shown by `switchyard types`...).
	Doc string
}

// Validator is implemented by handlers that check their configuration when
// registered.
type Validator interface{ Validate() error }

// Closer is implemented by handlers that hold resources.
type Closer interface{ Close() error }

// Registry maps handler types to handlers. It is safe for concurrent use.
type Registry struct {
	mu    sync.RWMutex
	infos map[string]Info
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{infos: map[string]Info{}} }

// ValidType reports whether t is a well-formed dotted type id.
func ValidType(t string) bool {
	if t == "" {
		return false
	}
	seg := 0
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case c == '.':
			if seg == 0 {
				return false
			}
			seg = 0
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || (seg > 0 && c >= '0' && c <= '9'):
			seg++
		default:
			return false
		}
	}
	return seg > 0
}

// Register adds a handler type; it refuses a type already registered.
func (r *Registry) Register(info Info) error { return r.add(info, false) }

// Replace registers a handler type, replacing any earlier one (the spec
// allows it; doing it through Replace makes it deliberate and visible).
func (r *Registry) Replace(info Info) error { return r.add(info, true) }

func (r *Registry) add(info Info, replace bool) error {
	if !ValidType(info.Type) {
		return fmt.Errorf("%w: %q", ErrInvalidType, info.Type)
	}
	if info.Handler == nil && info.New != nil {
		info.Handler = info.New()
	}
	if info.Handler == nil {
		return fmt.Errorf("nodes: type %q has no handler", info.Type)
	}
	if v, ok := info.Handler.(Validator); ok {
		if err := v.Validate(); err != nil {
			return fmt.Errorf("nodes: type %q: %w", info.Type, err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.infos[info.Type]; dup && !replace {
		return fmt.Errorf("%w: %q", ErrDuplicate, info.Type)
	}
	r.infos[info.Type] = info
	return nil
}

// Lookup returns the handler of a type.
func (r *Registry) Lookup(t string) (Handler, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	info, ok := r.infos[t]
	return info.Handler, ok
}

// Info returns what was registered for a type.
func (r *Registry) Info(t string) (Info, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	info, ok := r.infos[t]
	return info, ok
}

// Types lists the registered types in order.
func (r *Registry) Types() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.infos))
	for t := range r.infos {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// Close closes every handler that holds resources.
func (r *Registry) Close() error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var errs []error
	for _, info := range r.infos {
		if c, ok := info.Handler.(Closer); ok {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

// Deps are what the built-in handlers need from their host.
type Deps struct {
	// Providers resolves an agent provider by name.
	Providers func(name string) (agent.Provider, error)
	// DefaultProvider is used when a node names none and its model implies none.
	DefaultProvider string
	// OverrideProviders runs every agent node on DefaultProvider (else
	// mock), whatever its llm_provider or llm_model say: a dry run of any
	// graph with the mock (switchyard run --provider mock
	// --override-providers).
	OverrideProviders bool
	// Interviewer asks people (wait.human).
	Interviewer Interviewer
	// Children runs child pipelines (stack.manager_loop).
	Children ChildRunner
	// Clock drives the manager loop's polling; nil is the real clock.
	Clock  clock.Clock
	Logger *slog.Logger
}

// RegisterBuiltins registers the built-in handler types.
func RegisterBuiltins(r *Registry, deps Deps) error {
	if deps.Clock == nil {
		deps.Clock = clock.Real()
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	ag := &agentRunner{deps: deps}
	for _, info := range []Info{
		{Type: "start", Handler: Start{}, Doc: "the entry point; does nothing"},
		{Type: "exit", Handler: Exit{}, Doc: "the exit point; goal gates are checked before it"},
		{Type: "codergen", Handler: &Codergen{agents: ag}, Doc: "runs a coding agent on the node's prompt"},
		{Type: "conditional", Handler: &Conditional{agents: ag}, Doc: "routes on the previous outcome, or on its own agent's verdict when it has a prompt"},
		{Type: "wait.human", Handler: &Human{Interviewer: deps.Interviewer, Clock: deps.Clock}, Doc: "asks a person to choose an outgoing edge"},
		{Type: "tool", Handler: Tool{}, Doc: "runs tool_command with sh -c"},
		{Type: "parallel", Handler: Parallel{}, Doc: "fans out to every outgoing edge"},
		{Type: "parallel.fan_in", Handler: &FanIn{agents: ag}, Doc: "joins parallel branches and merges what they learned"},
		{Type: "stack.manager_loop", Handler: &Manager{Children: deps.Children, Clock: deps.Clock}, Doc: "runs and supervises a child pipeline"},
	} {
		if err := r.Register(info); err != nil {
			return err
		}
	}
	return nil
}
