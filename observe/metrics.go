package observe

import (
	"github.com/prometheus/client_golang/prometheus"
)

// The metrics, all prefixed switchyard_. Labels: session and node are ids;
// edge is an edge id ("" for a node's inbox); provider and model are the
// node's llm_provider and llm_model (the default provider when unset).
type metrics struct {
	firings       *prometheus.CounterVec   // session, node, status
	failures      *prometheus.CounterVec   // session, node
	retries       *prometheus.CounterVec   // session, node
	attempts      *prometheus.HistogramVec // session, node: handler attempt seconds
	firingSeconds *prometheus.HistogramVec // session, node: whole firing, retries included
	drops         *prometheus.CounterVec   // session, node, edge
	refusals      *prometheus.CounterVec   // session, node, kind
	tokens        *prometheus.CounterVec   // provider, model, direction
	cost          *prometheus.CounterVec   // provider, model
	journal       prometheus.Histogram
	journalErrors prometheus.Counter
	events        *prometheus.CounterVec // session, kind
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		firings: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_node_firings_total",
			Help: "Node firings completed, by outcome status."}, []string{"session", "node", "status"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_node_failures_total",
			Help: "Node firings that ended failed (retries spent)."}, []string{"session", "node"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_node_retries_total",
			Help: "Handler attempts retried after a retryable outcome."}, []string{"session", "node"}),
		attempts: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "switchyard_handler_duration_seconds",
			Help:    "Duration of one handler attempt.",
			Buckets: []float64{.0001, .001, .01, .05, .1, .5, 1, 5, 15, 60, 300, 1200}}, []string{"session", "node"}),
		firingSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "switchyard_node_firing_duration_seconds",
			Help:    "Duration of a node firing, retries and backoff included.",
			Buckets: []float64{.0001, .001, .01, .05, .1, .5, 1, 5, 15, 60, 300, 1200}}, []string{"session", "node"}),
		drops: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_edge_dropped_total",
			Help: "Envelopes a delivery buffer discarded (superseded in latest/debounce mode, or not deliverable)."}, []string{"session", "node", "edge"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_node_refusals_total",
			Help: "Firings the scheduler refused or stopped, by event kind (node.refused, budget.exceeded, iterations.exceeded, stall.detected)."}, []string{"session", "node", "kind"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_llm_tokens_total",
			Help: "Tokens used by agent runs, by provider, model and direction (input, output)."}, []string{"provider", "model", "direction"}),
		cost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_llm_cost_usd_total",
			Help: "Cost of agent runs in US dollars, by provider and model."}, []string{"provider", "model"}),
		journal: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "switchyard_journal_write_seconds",
			Help:    "Duration of a journal commit (a firing's record; a checkpoint when due).",
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .05, .1, .5, 1}}),
		journalErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "switchyard_journal_write_errors_total",
			Help: "Journal commits that failed."}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_events_total",
			Help: "Session events, by kind."}, []string{"session", "kind"}),
	}
	reg.MustRegister(m.firings, m.failures, m.retries, m.attempts, m.firingSeconds, m.drops, m.refusals,
		m.tokens, m.cost, m.journal, m.journalErrors, m.events)
	return m
}

// Descriptions of the metrics read at scrape time (collector).
var (
	descBufferReady = prometheus.NewDesc("switchyard_edge_buffer_depth",
		"Envelopes waiting in a node's delivery buffer, ready to be taken.", []string{"session", "node", "edge"}, nil)
	descBufferHeld = prometheus.NewDesc("switchyard_edge_buffer_held",
		"Envelopes a delivery buffer holds, ready or still in a debounce window.", []string{"session", "node", "edge"}, nil)
	descBudgetSpent = prometheus.NewDesc("switchyard_budget_spent",
		"What a budget scope has spent (time in seconds, tokens, cost in USD).", []string{"session", "scope", "dimension"}, nil)
	descBudgetLimit = prometheus.NewDesc("switchyard_budget_limit",
		"A budget scope's limit (time in seconds, tokens, cost in USD); only dimensions with a limit.", []string{"session", "scope", "dimension"}, nil)
	descSessions = prometheus.NewDesc("switchyard_sessions",
		"Sessions this process has seen, by state (running, success, fail, stopped...).", []string{"state"}, nil)
	descNodeStates = prometheus.NewDesc("switchyard_nodes",
		"Nodes of running sessions, by scheduler state (idle, waiting, ready, running, stopped).", []string{"session", "state"}, nil)
)
