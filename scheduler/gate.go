package scheduler

import "time"

// Input is one arrival a gate hands to a firing.
type Input struct {
	Edge string // the edge id, or "" for the inbox
	Item any    // the envelope (opaque to the scheduler)
}

// Decision is a gate's answer: fire now with Inputs, or wait.
type Decision struct {
	Fire   bool
	Inputs []Input
	// Tick is true for a firing that is a tick: a cron time, or a trigger
	// with nothing held. When Inputs is empty the owner makes a tick
	// envelope.
	Tick bool
	// Missing names the upstream edges a join fired without (join timeout,
	// quorum, any).
	Missing []string
	// Reason says why the node waits (when Fire is false).
	Reason string
	// Scheduled is the cron time a schedule node's firing stands for
	// (zero for other firings and explicit triggers). Late: it is a
	// missed time fired at a resume or takeover (catch-up), standing for
	// Missed scheduled times (-1: more than could be counted).
	Scheduled time.Time
	Late      bool
	Missed    int
}

// causer is implemented by gates that wait: the structured form of
// Waiting, for GateState. cause is cheap (it runs on every arrival that
// waits); evidence is built only when a state is read.
type causer interface {
	cause() string
	evidence() map[string]string
}

// Gate is one node's trigger mode: gateAny, gateAll (join), gateManual,
// gateCron, one per file. A gate is owned by the Scheduler and only used
// under its lock; its timers are armed through the clock and their
// callbacks only send a Notice, never touch the gate.
type Gate interface {
	// Offer takes an arrival.
	Offer(in Input) Decision
	// Trigger is an explicit (manual) trigger.
	Trigger() Decision
	// Skip says an upstream edge will not deliver (an unselected branch).
	Skip(edge string) Decision
	// Timer is called when the gate's timer fired (join timeout, cron).
	Timer() Decision
	// Waiting describes what the gate waits for ("" when nothing).
	Waiting() string
	// Wants reports whether an arrival on edge would be used now. Gates
	// that do not want one leave it in the edge's delivery buffer, where
	// the edge's mode (latest, debounce) applies.
	Wants(edge string) bool
}
