package scheduler

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard/switchyard/edges"
	"github.com/switchyard/switchyard/graph"
)

// Trigger modes.
const (
	TriggerAny      = "any"
	TriggerAll      = "all"
	TriggerManual   = "manual"
	TriggerSchedule = "schedule"
)

// Limits are budget limits; zero means none.
type Limits struct {
	Time   time.Duration
	Tokens int64
	Cost   float64
}

func (l Limits) empty() bool { return l.Time == 0 && l.Tokens == 0 && l.Cost == 0 }

// NodeConfig is what the scheduler reads of a node.
type NodeConfig struct {
	ID          string
	Trigger     string
	Join        string // all, any, quorum:N
	Quorum      int
	JoinTimeout time.Duration
	Schedule    string
	Upstream    []string // edge ids of the node's incoming edges
	// MaxIterations caps the node's firings (N 0: none); with a Window the
	// node waits instead of stopping.
	MaxIterations graph.Limit
	Budget        Limits
	Scopes        []string // budget scopes above the node: subgraphs, then the graph
	StallAfter    int
	Locks         []string
	// Catchup: how old a schedule node's missed time may be and still
	// fire, late, at a resume or takeover (catchup; 0: never).
	Catchup time.Duration
}

// DefaultCatchup is a schedule node's catchup when neither it nor the
// graph sets one: a tick missed while the session had no owner (a
// takeover, a handover, a restart, a stop) fires late if it is at most an
// hour old — for an hourly or daily node, the tick of the outage; for a
// frequent one, the latest tick only.
const DefaultCatchup = time.Hour

// Config is the scheduler's view of a graph.
type Config struct {
	Nodes map[string]*NodeConfig
	// MaxIterations caps the session's node firings (N 0: none); with a
	// Window every node waits instead of stopping.
	MaxIterations graph.Limit
	MaxInFlight   int
	StallTimeout  time.Duration
	Scopes        map[string]Limits // subgraph and graph budgets by scope name
}

// GraphScope is the scope name of the graph's own budget.
const GraphScope = "graph"

// graphOnly is the Scopes of a node in no subgraph (its capacity its
// length: an append copies it).
var graphOnly = []string{GraphScope}[:1:1]

func limitsOf(a graph.Attrs) (Limits, error) {
	var l Limits
	if v, ok := a["budget_time"]; ok {
		d, err := graph.ParseDuration(v.Text)
		if err != nil {
			return l, fmt.Errorf("budget_time: %w", err)
		}
		l.Time = d
	}
	if v, ok := a["budget_tokens"]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(v.Text), 10, 64)
		if err != nil {
			return l, fmt.Errorf("budget_tokens %q: want an integer", v.Text)
		}
		l.Tokens = n
	}
	if v, ok := a["budget_cost"]; ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(v.Text), 64)
		if err != nil {
			return l, fmt.Errorf("budget_cost %q: want a number", v.Text)
		}
		l.Cost = f
	}
	return l, nil
}

// ConfigFrom reads a graph's scheduling attributes: the graph's
// (max_iterations: graph.IterationLimit, a pipeline's default 10,000, a
// session's none; max_in_flight; stall_timeout; budgets),
// each subgraph's budgets, and every node's (NodeConfigFrom).
func ConfigFrom(g *graph.Graph) (*Config, error) {
	cfg := &Config{Nodes: map[string]*NodeConfig{}, MaxIterations: g.IterationLimit(), Scopes: map[string]Limits{}}
	if v, ok := g.Attrs.Int("max_in_flight"); ok {
		cfg.MaxInFlight = v
	}
	if d, ok := g.Attrs.Duration("stall_timeout"); ok {
		cfg.StallTimeout = d
	}
	gl, err := limitsOf(g.Attrs)
	if err != nil {
		return nil, fmt.Errorf("graph: %w", err)
	}
	if !gl.empty() {
		cfg.Scopes[GraphScope] = gl
	}
	scopes, memberOf, err := subgraphScopes(g)
	if err != nil {
		return nil, err
	}
	for k, l := range scopes {
		cfg.Scopes[k] = l
	}
	for _, n := range g.Nodes {
		nc, err := nodeConfig(g, n, memberOf[n.ID])
		if err != nil {
			return nil, err
		}
		cfg.Nodes[n.ID] = nc
	}
	return cfg, nil
}

// configKey is the key of a graph's Config (ConfigOf).
type configKey struct{}

// configOrError is ConfigFrom's answer, kept with the graph.
type configOrError struct {
	cfg *Config
	err error
}

// ConfigOf is ConfigFrom(g), read once per graph (graph.Graph.Derive):
// every session of a graph shares it, so it must not be changed (a
// Scheduler only reads its Config; Reconfigure replaces it whole).
func ConfigOf(g *graph.Graph) (*Config, error) {
	c := g.Derive(configKey{}, func(g *graph.Graph) any {
		cfg, err := ConfigFrom(g)
		return configOrError{cfg, err}
	}).(configOrError)
	return c.cfg, c.err
}

// subgraphScopes returns the budgets of the subgraphs that have one, by
// scope name ("subgraph:<id>"), and the scopes each node is a member of.
func subgraphScopes(g *graph.Graph) (map[string]Limits, map[string][]string, error) {
	scopes, memberOf := map[string]Limits{}, map[string][]string{}
	for _, sg := range g.Subgraphs {
		l, err := limitsOf(sg.Attrs)
		if err != nil {
			return nil, nil, fmt.Errorf("subgraph %s: %w", sg.ID, err)
		}
		if l.empty() {
			continue
		}
		scope := "subgraph:" + sg.ID
		scopes[scope] = l
		for _, n := range sg.Nodes {
			memberOf[n] = append(memberOf[n], scope)
		}
	}
	return scopes, memberOf, nil
}

// NodeConfigFrom reads one node's scheduling attributes: trigger (default
// any, all for a fan-in node with several incoming edges), join,
// join_timeout, schedule, max_iterations (else max_visits, else the
// graph's max_visits: graph.Node.VisitLimit, a pipeline's default 100, a
// session's none), budgets, stall_after (node, else
// graph, default 3), locks; and its upstream edges and budget scopes.
func NodeConfigFrom(g *graph.Graph, n *graph.Node) (*NodeConfig, error) {
	_, memberOf, err := subgraphScopes(g)
	if err != nil {
		return nil, err
	}
	return nodeConfig(g, n, memberOf[n.ID])
}

func nodeConfig(g *graph.Graph, n *graph.Node, subgraphs []string) (*NodeConfig, error) {
	var err error
	nc := &NodeConfig{ID: n.ID, Trigger: n.Attrs.String("trigger"), Join: n.Attrs.String("join"),
		Schedule: n.Attrs.String("schedule"), MaxIterations: n.VisitLimit(g), StallAfter: DefaultStallAfter}
	if nc.Trigger == "" {
		nc.Trigger = TriggerAny
		if g.HandlerType(n) == graph.TypeFanIn && len(g.Incoming(n.ID)) > 1 {
			nc.Trigger = TriggerAll
		}
	}
	if nc.Trigger == TriggerAll || nc.Join != "" && g.HandlerType(n) != graph.TypeParallel {
		switch {
		case nc.Join == "" || nc.Join == "all":
			nc.Join = "all"
		case nc.Join == "any":
		case strings.HasPrefix(nc.Join, "quorum:"):
			q, err := strconv.Atoi(strings.TrimPrefix(nc.Join, "quorum:"))
			if err != nil || q < 1 {
				return nil, fmt.Errorf("node %s: join %q: want all, any or quorum:N", n.ID, nc.Join)
			}
			nc.Quorum = q
		default:
			if g.HandlerType(n) != graph.TypeParallel {
				return nil, fmt.Errorf("node %s: join %q: want all, any or quorum:N", n.ID, nc.Join)
			}
		}
	}
	switch nc.Trigger {
	case TriggerAny, TriggerAll, TriggerManual:
	case TriggerSchedule:
		if nc.Schedule == "" {
			return nil, fmt.Errorf("node %s: trigger=schedule needs a schedule (a cron spec)", n.ID)
		}
		if _, err := parseCron(nc.Schedule); err != nil {
			return nil, fmt.Errorf("node %s: schedule %q: %w", n.ID, nc.Schedule, err)
		}
	default:
		return nil, fmt.Errorf("node %s: trigger %q: want any, all, manual or schedule", n.ID, nc.Trigger)
	}
	if d, ok := n.Attrs.Duration("join_timeout"); ok {
		nc.JoinTimeout = d
	}
	if nc.Trigger == TriggerSchedule {
		nc.Catchup = DefaultCatchup
		if d, ok := n.Attrs.Duration("catchup"); ok {
			nc.Catchup = d
		} else if d, ok := g.Attrs.Duration("catchup"); ok {
			nc.Catchup = d
		}
	}
	for _, e := range g.Incoming(n.ID) {
		nc.Upstream = append(nc.Upstream, edges.EdgeID(e))
	}
	if v, ok := n.Attrs.Int("stall_after"); ok {
		nc.StallAfter = v
	} else if v, ok := g.Attrs.Int("stall_after"); ok {
		nc.StallAfter = v
	}
	if nc.Budget, err = limitsOf(n.Attrs); err != nil {
		return nil, fmt.Errorf("node %s: %w", n.ID, err)
	}
	if len(subgraphs) == 0 {
		nc.Scopes = graphOnly // read, never written: one slice for every such node
	} else {
		nc.Scopes = append(append([]string(nil), subgraphs...), GraphScope)
	}
	for _, l := range strings.Split(n.Attrs.String("locks"), ",") {
		if l = strings.TrimSpace(l); l != "" {
			nc.Locks = append(nc.Locks, l)
		}
	}
	return nc, nil
}
