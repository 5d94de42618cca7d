package scheduler

// gateAny fires on every arrival (trigger=any, the default). It holds
// nothing, so it never waits.
type gateAny struct{}

var _ Gate = gateAny{}

func (gateAny) Offer(in Input) Decision { return Decision{Fire: true, Inputs: []Input{in}} }

// Trigger fires with a tick: an explicit trigger of a node that has
// nothing held.
func (gateAny) Trigger() Decision { return Decision{Fire: true, Tick: true} }

func (gateAny) Skip(string) Decision { return Decision{} }
func (gateAny) Timer() Decision      { return Decision{} }
func (gateAny) Waiting() string      { return "" }
func (gateAny) Wants(string) bool    { return true }
