// Package scheduler decides when a node may fire and when it must stop.
// It is the pure decision layer of a session: it knows nothing of NATS,
// actors or handlers, starts no goroutine of its own, and answers every
// question with a plain value. The node actors call it on every arriving
// envelope (Offer), on explicit triggers (Trigger), on unselected branches
// (Skip), before a handler runs (Admit), during and after it (Charge,
// Release), and when one of its timers asks them to (a Notice). A live
// edit of the graph is applied with Reconfigure; Snapshot and Restore carry
// its state across a resume.
//
// # Attributes
//
// ConfigFrom and NodeConfigFrom read these graph attributes:
//
//	trigger        node   any (default: fire on each arrival); all (join: fire
//	                      once every connected upstream edge has delivered since
//	                      the last firing; the default for a fan-in node with
//	                      several incoming edges); manual (fire only on an
//	                      explicit trigger); schedule (fire on the cron spec)
//	schedule       node   cron spec for trigger=schedule: robfig/cron with an
//	                      optional seconds field, or a descriptor (@hourly,
//	                      @every 1m); each time fires a tick with whatever
//	                      arrived since the last one
//	catchup        node, graph  duration (default 1h; 0: never): how old a
//	                      missed cron time may be and still fire, once and
//	                      late, at Start (see Missed cron times)
//	join           node   all | any | quorum:N, how many upstream edges a join
//	                      needs (parallel nodes use join to name their fan-in)
//	join_timeout   node   duration: fire with what arrived once the first
//	                      arrival waited this long; Decision.Missing names the
//	                      edges that did not deliver
//	max_iterations node   firings allowed (alias max_visits; default the graph's
//	                      max_visits, 100)
//	max_visits     node   as max_iterations (the Attractor name)
//	max_iterations graph  node firings allowed in the session (default 10,000)
//	budget_time    node, subgraph, graph  wall time across all firings
//	budget_tokens  node, subgraph, graph  input+output tokens reported
//	budget_cost    node, subgraph, graph  cost reported (any currency)
//	stall_after    node, graph  stop a node after this many identical results
//	                      in a row (same status and output hash, or same
//	                      failure; default 3; 0 disables)
//	stall_timeout  graph  duration: stop the session when no envelope was
//	                      consumed and no outcome came for this long
//	max_in_flight  graph  handlers running at once across the session (0: no cap)
//	locks          node   comma-separated advisory file locks ("src/,go.mod");
//	                      a path conflicts with itself and with every path
//	                      under it, so "src/" conflicts with "src/a.go"
//
// # Decisions
//
// A Gate per node implements its trigger mode (gateAny, gateAll, gateManual,
// gateCron). A join marks each upstream edge waiting, delivered or skipped,
// so a branch the router did not select (Skip) cannot hang it.
//
// Admit checks, in this order, the stop conditions — the node's firing cap,
// the session's, the budgets covering the node (its own, its subgraphs',
// the graph's), a stall — and then the waits: a slot under max_in_flight
// (FIFO), then the node's whole lock set (all or nothing, FIFO among
// conflicting waiters). A stop is permanent and carries a sentinel error
// (ErrMaxIterations, ErrBudgetExceeded, ErrStalled); a wait ends with a
// NoticeAdmit. Budgets announce 80% and 100% once each; a budget spent while
// handlers run stops every node under it and asks the owner to cancel the
// running ones (NoticeCancel); a ticket's Deadline is when the tightest time
// budget runs out.
//
// Nothing is dropped silently: every wait or refusal is the node's
// GateState (State, Cause, Reason, Fields), is returned as an Event or a
// Decision.Reason for the owner to publish, and is explained by Explain.
//
// # Missed cron times
//
// A schedule node's firing carries the time it stands for
// (Decision.Scheduled, then Ticket.Scheduled); its Release records that
// time as the node's last tick (Snapshot.Ticks), so the tick is "fired"
// exactly when the firing's journal record commits it. Start, which the
// owner calls once it holds the session and Restore brought the journal's
// state back, compares each node's last tick with now: the latest
// scheduled time in between is to fire once if it is at most the node's
// Catchup old, and CatchUp — called once the owner can commit a firing —
// fires it (a NoticeTimer, then a Decision with Late and Missed);
// otherwise none fires and Start returns a cron.missed event. So a
// tick due while nobody owned the session fires late, once, and a tick
// already committed never fires again, whichever process starts next.
//
// # Time
//
// Every timer — join timeouts, cron times, the session's stall watchdog —
// is armed through the injected clock.Clock; its callback only calls notify.
// Tests drive a clock.Fake and need no sleeps.
//
// # Concurrency and lock order
//
// A Scheduler is safe for concurrent use. It has one mutex, which guards
// all of its state (gates, counters, budgets, queues, states); no method
// blocks while holding it, and notify is never called with it held, so the
// owner may call back into the scheduler from notify. Timer callbacks take
// no lock: they only call notify. The clock's own lock is taken under the
// scheduler's (arming and stopping timers), never the other way round.
// Lock order: Scheduler.mu, then the clock's.
package scheduler
