package graph

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Scope says where an attribute may be written. Scopes combine as a bit set.
type Scope uint8

// Scopes.
const (
	ScopeGraph    Scope = 1 << iota // the graph: graph [...] or top-level key=value
	ScopeSubgraph                   // a subgraph's own graph attributes
	ScopeNode                       // a node (or a node [...] default block)
	ScopeEdge                       // an edge (or an edge [...] default block)
)

// String names the scopes in the set, e.g. "graph,node".
func (s Scope) String() string {
	var names []string
	for _, x := range []struct {
		s    Scope
		name string
	}{{ScopeGraph, "graph"}, {ScopeSubgraph, "subgraph"}, {ScopeNode, "node"}, {ScopeEdge, "edge"}} {
		if s&x.s != 0 {
			names = append(names, x.name)
		}
	}
	return strings.Join(names, ",")
}

// AttrType is the type an attribute's value must have. Values are checked
// by their text, so max_retries="3" is as good as max_retries=3.
type AttrType uint8

// Attribute types.
const (
	AttrString    AttrType = iota // any text
	AttrInteger                   // a decimal integer
	AttrFloat                     // a decimal number
	AttrBoolean                   // true or false
	AttrDuration                  // 250ms, 30s, 15m, 2h, 1d, or an integer (seconds)
	AttrEnum                      // one of AttrSpec.Values
	AttrNodeRef                   // the id of a node of the graph
	AttrCondition                 // a condition (edges/cond)
	AttrLimit                     // a firing cap: a count (0: none) or COUNT/DURATION (100/1h)
)

// String names the type.
func (t AttrType) String() string {
	return [...]string{"string", "integer", "float", "boolean", "duration", "enum", "node id", "condition", "limit"}[t]
}

// AttrSpec describes one attribute Switchyard reads: where it is written,
// its type, its default (as text; "" when it has none) and what it means.
// Attributes not in the table are kept verbatim for custom handlers.
type AttrSpec struct {
	Key     string
	Scopes  Scope
	Type    AttrType
	Default string
	Values  []string // AttrEnum: the allowed values
	Doc     string

	min    int64 // AttrInteger and AttrFloat: the least allowed value, when hasMin
	hasMin bool
}

func attr(key string, scopes Scope, typ AttrType, def, doc string) AttrSpec {
	return AttrSpec{Key: key, Scopes: scopes, Type: typ, Default: def, Doc: doc}
}

func enum(key string, scopes Scope, def, doc string, values ...string) AttrSpec {
	return AttrSpec{Key: key, Scopes: scopes, Type: AttrEnum, Default: def, Values: values, Doc: doc}
}

func (a AttrSpec) atLeast(n int64) AttrSpec { a.min, a.hasMin = n, true; return a }

const (
	scopeGS   = ScopeGraph | ScopeSubgraph
	scopeGSN  = ScopeGraph | ScopeSubgraph | ScopeNode
	scopeGN   = ScopeGraph | ScopeNode
	scopeNE   = ScopeNode | ScopeEdge
	scopeGNE  = ScopeGraph | ScopeNode | ScopeEdge
	scopeNode = ScopeNode
	scopeEdge = ScopeEdge
)

// attrTable: the Attractor spec's appendix A, then Switchyard's runtime
// attributes. docs/dot-reference.md documents every entry (a test checks).
var attrTable = []AttrSpec{
	// graph (spec 2.5)
	attr("goal", ScopeGraph, AttrString, "", "what the run is for; replaces $goal in prompts"),
	attr("label", scopeGNE|ScopeSubgraph, AttrString, "", "display name (node: defaults to the id; subgraph: becomes a class)"),
	attr("model_stylesheet", ScopeGraph, AttrString, "", "per-node model settings (spec section 8)"),
	attr("default_max_retries", ScopeGraph, AttrInteger, "0", "retries of nodes that set no max_retries").atLeast(0),
	attr("default_max_retry", ScopeGraph, AttrInteger, "0", "alias of default_max_retries").atLeast(0),
	attr("retry_target", scopeGN, AttrNodeRef, "", "where a failure or an unsatisfied goal gate goes"),
	attr("fallback_retry_target", scopeGN, AttrNodeRef, "", "the next choice after retry_target"),
	enum("default_fidelity", ScopeGraph, "compact", "the fidelity of nodes that set none", fidelityModes...),
	attr("stack.child_dotfile", scopeGN, AttrString, "", "the child pipeline of manager-loop nodes"),
	attr("stack.child_workdir", scopeGN, AttrString, "", "the working directory of the child pipeline"),
	attr("tool_hooks.pre", scopeGN, AttrString, "", "a command run before every tool call"),
	attr("tool_hooks.post", scopeGN, AttrString, "", "a command run after every tool call"),
	enum("kind", ScopeGraph, "pipeline", "session makes a reactive session", "pipeline", "session"),
	attr("max_iterations", ScopeGraph|ScopeNode, AttrLimit, "10000", "graph: node firings of a whole run; node: firings of the node (sessions: no default; 0: no limit; 100/1h: at most 100 in any hour, the node waits)"),
	attr("max_visits", scopeGN, AttrLimit, "100", "how often one node may run (sessions: no default; 0: no limit; 100/1h: at most 100 in any hour, the node waits)"),
	attr("max_in_flight", ScopeGraph, AttrInteger, "", "at most this many handlers run at once (unset: no cap)").atLeast(0),
	attr("stall_timeout", ScopeGraph, AttrDuration, "", "stop the session when nothing happened for this long"),
	attr("workflow_mode", ScopeGraph, AttrString, "", "a free-form mode the handlers read"),
	attr("placement", ScopeGraph, AttrString, "", "labels the process running the session must have, k=v,... (docs/cluster.md#placement)"),

	// node (spec 2.6)
	attr("shape", scopeNode, AttrString, DefaultShape, "the handler, by the shape table"),
	attr("type", scopeNode, AttrString, "", "an explicit handler type; wins over shape"),
	attr("prompt", scopeNode, AttrString, "", "the agent's instructions; $goal expands"),
	attr("max_retries", scopeNode, AttrInteger, "", "extra attempts (default: the graph's default_max_retries)").atLeast(0),
	attr("goal_gate", scopeNode, AttrBoolean, "false", "the node must succeed before the run may exit"),
	enum("fidelity", scopeNE, "", "how much prior context the agent gets", fidelityModes...),
	attr("thread_id", scopeNE, AttrString, "", "the agent thread reused under full fidelity"),
	attr("class", scopeNode, AttrString, "", "comma-separated classes for the stylesheet"),
	attr("timeout", scopeNode, AttrDuration, "", "the node's time limit per run"),
	attr("llm_model", scopeNode, AttrString, "", "the model"),
	attr("llm_provider", scopeNode, AttrString, "", "the provider (default: from the model)"),
	enum("reasoning_effort", scopeNode, "high", "the agent's reasoning effort", "low", "medium", "high"),
	attr("max_tokens", scopeNode, AttrInteger, "", "model API agents: the longest answer in tokens").atLeast(1),
	enum("openai_api", scopeNode, "", "the openai provider's API (default: responses on api.openai.com, else chat)", "responses", "chat"),
	attr("auto_status", scopeNode, AttrBoolean, "false", "an agent that writes no status succeeds"),
	attr("allow_partial", scopeNode, AttrBoolean, "false", "exhausted retries end partial_success instead of fail"),
	enum("retry_policy", scopeNode, "", "a retry preset (unset: max_retries, else the graph's default_max_retries, 0 by default, with standard's delays)", "none", "standard", "aggressive", "linear", "patient"),
	attr("retry_on_fail", scopeNode, AttrBoolean, "false", "also retry a plain fail"),
	enum("on_failure", scopeNode, "", "exit ends the run at once; route follows edge selection; skip and continue carry on as skipped or partial_success", "route", "exit", "skip", "continue"),
	attr("tool_command", scopeNode, AttrString, "", "tool nodes: the shell command"),
	attr("pool", scopeNode, AttrString, "", "run the node's work on the workers of this pool (docs/workers.md)"),
	enum("work_mode", scopeNode, "queue", "pool nodes: queue (work-queue stream, redelivered) or request (a NATS request)", "queue", "request"),
	enum("work_format", scopeNode, "", "pool nodes: how jobs are encoded (default json for type=remote and work_mode=request, else proto)", "json", "proto"),
	attr("artifacts", scopeNode, AttrString, "", "comma-separated globs of files (relative to the work dir) the node produces; durable sessions store them in the object store and send them on"),
	attr("human.default_choice", scopeNode, AttrString, "", "human gates: the choice taken on timeout"),
	enum("human.question_type", scopeNode, "single_select", "human gates: the kind of question",
		"single_select", "multi_select", "free_text", "confirm"),
	enum("join_policy", scopeNode, "wait_all", "parallel nodes: how branches join", "wait_all"),
	attr("max_parallel", scopeNode, AttrInteger, "4", "parallel nodes: branches run at once").atLeast(1),
	attr("manager.poll_interval", scopeNode, AttrDuration, "45s", "manager loops: time between observations"),
	attr("manager.max_cycles", scopeNode, AttrInteger, "1000", "manager loops: cycles before the node fails").atLeast(1),
	attr("manager.stop_condition", scopeNode, AttrCondition, "", "manager loops: a condition that ends supervision"),
	attr("manager.actions", scopeNode, AttrString, "observe,wait", "manager loops: observe, steer, wait"),
	attr("stack.child_autostart", scopeNode, AttrBoolean, "true", "manager loops: start the child pipeline"),

	// node, Switchyard runtime
	enum("trigger", scopeNode, "any", "when the node fires", "any", "all", "manual", "schedule"),
	attr("schedule", scopeNode, AttrString, "", "trigger=schedule: a cron spec"),
	attr("catchup", scopeGN, AttrDuration, "1h", "trigger=schedule: a tick missed while the session had no owner fires once, late, if at most this old (0: never)"),
	attr("join", scopeNode, AttrString, "all", "trigger=all: all, any or quorum:N; parallel nodes: the fan-in node"),
	attr("join_timeout", scopeNode, AttrDuration, "", "fire a join with what arrived after this long"),
	attr("budget_time", scopeGSN, AttrDuration, "", "wall time of the handlers"),
	attr("budget_tokens", scopeGSN, AttrInteger, "", "tokens the handlers reported").atLeast(0),
	AttrSpec{Key: "budget_cost", Scopes: scopeGSN, Type: AttrFloat, Doc: "cost the handlers reported"}.atLeast(0),
	attr("stall_after", scopeGN, AttrInteger, "3", "stop a node repeating itself this many times (0: never)").atLeast(0),
	attr("locks", scopeNode, AttrString, "", "advisory file locks, comma-separated paths"),
	enum("mode", scopeNode, "", "agent nodes: interactive holds a conversation (switchyard chat); auto keeps working on ticks until DONE; unset runs once per firing", "interactive", "auto"),
	attr("role", scopeNode, AttrString, "", "the agent's role"),
	attr("input_key", scopeNode, AttrString, "", "Go agent and tool nodes: the state key they read their input from (default: _previous, else the session input)"),

	// edge (spec 2.7)
	attr("condition", scopeEdge, AttrCondition, "", "the edge is taken only when it holds"),
	attr("weight", scopeEdge, AttrInteger, "0", "higher wins"),
	attr("loop_restart", scopeEdge, AttrBoolean, "false", "restart the run at the target"),
	enum("delivery", scopeEdge, "queue", "what the edge's buffer keeps", "queue", "latest", "debounce"),
	attr("debounce", scopeEdge, AttrDuration, "", "delivery=debounce: the quiet window"),
	enum("dir", scopeEdge, "forward", "both makes the edge bidirectional", "forward", "back", "both", "none"),
}

var fidelityModes = []string{"full", "truncate", "compact", "summary:low", "summary:medium", "summary:high"}

// attrIndex maps key to the specs with that key (one per scope set).
var attrIndex = func() map[string][]AttrSpec {
	m := map[string][]AttrSpec{}
	for _, a := range attrTable {
		m[a.Key] = append(m[a.Key], a)
	}
	return m
}()

// Attributes returns the specs of every attribute Switchyard reads, sorted
// by key.
func Attributes() []AttrSpec {
	out := append([]AttrSpec(nil), attrTable...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// LookupAttr returns the spec of key written in scope.
func LookupAttr(scope Scope, key string) (AttrSpec, bool) {
	for _, a := range attrIndex[key] {
		if a.Scopes&scope != 0 {
			return a, true
		}
	}
	return AttrSpec{}, false
}

// Check reports whether text is a valid value of the attribute, with a
// message saying what is wanted when it is not. Node references and
// conditions are checked by their own rules, with the graph at hand.
func (a AttrSpec) Check(text string) error {
	t := strings.TrimSpace(text)
	switch a.Type {
	case AttrInteger:
		n, err := strconv.ParseInt(t, 10, 64)
		if err != nil {
			return fmt.Errorf("want an integer")
		}
		if a.hasMin && n < a.min {
			return fmt.Errorf("want an integer >= %d", a.min)
		}
	case AttrFloat:
		f, err := strconv.ParseFloat(t, 64)
		if err != nil {
			return fmt.Errorf("want a number")
		}
		if a.hasMin && f < float64(a.min) {
			return fmt.Errorf("want a number >= %d", a.min)
		}
	case AttrBoolean:
		if text != "true" && text != "false" {
			return fmt.Errorf("want true or false")
		}
	case AttrDuration:
		if text == "" {
			return nil
		}
		if _, err := ParseDuration(text); err != nil {
			return fmt.Errorf("want a duration like 250ms, 30s, 15m, 2h, 1d")
		}
	case AttrLimit:
		if _, err := ParseLimit(t); err != nil {
			return err
		}
	case AttrEnum:
		if text == "" {
			return nil
		}
		for _, v := range a.Values {
			if text == v {
				return nil
			}
		}
		return fmt.Errorf("want one of %s", strings.Join(a.Values, ", "))
	}
	return nil
}
