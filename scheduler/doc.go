// Package scheduler decides when a node may fire and when it must stop.
// It knows nothing of NATS or handlers: the node actors call it on every
// arriving envelope, before and after every handler run, and when one of
// its timers asks them to (a Notice).
//
// Per node, a Gate implements the trigger mode (attribute trigger):
//
//	any       fire on each arriving envelope (the default)
//	all       join: fire once every connected upstream edge has delivered
//	          since the last firing; join="all|any|quorum:N" and
//	          join_timeout (fire with what arrived, naming what is missing)
//	manual    fire only on an explicit trigger
//	schedule  fire on the cron spec in schedule (robfig/cron, optional
//	          seconds, descriptors such as @every 1m), with a tick
//
// Before a handler runs, Admit checks the node's stop conditions
// (max_iterations per node, default max_visits 100; the graph's
// max_iterations, default 10,000; budgets; stall) and its waits (the graph's
// max_in_flight; the node's advisory file locks). Budgets — budget_time,
// budget_tokens, budget_cost — apply at node, subgraph and graph level;
// crossing 80% and 100% are events, and a spent budget stops the nodes it
// covers (a running handler is cancelled through its context). Stall
// detection stops a node that produced the same outcome and output (or the
// same failure) stall_after times in a row (default 3; 0 disables), and a
// session with no progress for stall_timeout.
//
// Every refusal or wait is the node's GateState, returned as an Event and
// explained by Explain. Time comes from an injected clock.Clock.
//
// Concurrency: a Scheduler is safe for concurrent use; one mutex guards all
// of its state, and notify is never called with it held.
package scheduler
