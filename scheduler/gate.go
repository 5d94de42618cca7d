package scheduler

// Input is one arrival a gate hands to a firing.
type Input struct {
	Edge string // the edge id, or "" for the inbox
	Item any    // the envelope (opaque to the scheduler)
}

// Decision is a gate's answer: fire now with Inputs, or wait.
type Decision struct {
	Fire   bool
	Inputs []Input
	// Tick is true for a cron firing.
	Tick bool
	// Missing names the upstream edges a join fired without (join timeout,
	// quorum, any).
	Missing []string
	// Reason says why the node waits (when Fire is false).
	Reason string
}

// Gate is one node's trigger mode. Gates are used under the Scheduler's
// lock.
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

// gateAny fires on every arrival.
type gateAny struct{}

func (gateAny) Offer(in Input) Decision { return Decision{Fire: true, Inputs: []Input{in}} }
func (gateAny) Trigger() Decision       { return Decision{Fire: true, Tick: true} }
func (gateAny) Skip(string) Decision    { return Decision{} }
func (gateAny) Timer() Decision         { return Decision{} }
func (gateAny) Waiting() string         { return "" }
func (gateAny) Wants(string) bool       { return true }
