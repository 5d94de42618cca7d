package scheduler

// Event kinds the scheduler returns for the owner to publish.
const (
	EventGateWaiting        = "gate.waiting"        // a wait: in-flight cap (join, manual and cron waits are Decision.Reason)
	EventLockWaiting        = "lock.waiting"        // a node waits for a file lock
	EventLockAcquired       = "lock.acquired"       // a node took its lock set
	EventLockReleased       = "lock.released"       // a node gave its lock set back
	EventBudgetThreshold    = "budget.threshold"    // a budget crossed 80%
	EventBudgetExceeded     = "budget.exceeded"     // a budget reached 100% (or a node was refused for it)
	EventIterationsExceeded = "iterations.exceeded" // a node or the session reached its firing cap
	EventIterationsWaiting  = "iterations.waiting"  // a node reached a windowed firing cap (N/window): it waits
	EventStallDetected      = "stall.detected"      // a node repeats itself, or the session made no progress
	EventCronMissed         = "cron.missed"         // a schedule node's missed times are older than its catchup: not fired
)

// Event is something the owner publishes on the session's event stream.
// Events are returned by the scheduler's methods, never sent: nothing is
// dropped and the owner decides the order.
type Event struct {
	Kind   string // one of the Event* constants
	Node   string // "" for the session
	Reason string // human text
	Fields map[string]string
}

// Notice kinds.
const (
	// NoticeTimer: a gate's timer fired (join timeout, cron time); call
	// Scheduler.Timer for Notice.Node.
	NoticeTimer = "timer"
	// NoticeAdmit: a slot or a lock Notice.Node waits for may be free;
	// call Admit again.
	NoticeAdmit = "admit"
	// NoticeCancel: a budget covering Notice.Node was spent while its
	// handler ran; cancel the handler.
	NoticeCancel = "cancel"
	// NoticeStall: the session made no progress for stall_timeout; call
	// Scheduler.StallTimeout (Notice.Node is "").
	NoticeStall = "stall"
	// NoticeStopped: a budget stopped Notice.Node: it will never fire
	// again, so what it holds is refused now — what its gate holds
	// (Scheduler.TakeHeld) and what waits in its buffers.
	NoticeStopped = "stopped"
)

// Notice asks the owner to call back into the scheduler. Notices come from
// timer goroutines (through the clock) or from the scheduler's methods
// after its lock is released; the owner turns them into actor messages
// and must not call the scheduler back synchronously from notify if it
// needs ordering with the call that caused it.
type Notice struct {
	Node string
	Kind string // one of the Notice* constants
}
