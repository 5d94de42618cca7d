package scheduler

// gateManual holds arrivals until an explicit trigger fires the node with
// all of them.
type gateManual struct{ held []Input }

func (g *gateManual) Offer(in Input) Decision {
	g.held = append(g.held, in)
	return Decision{Reason: g.Waiting()}
}

func (g *gateManual) Trigger() Decision {
	d := Decision{Fire: true, Inputs: g.held, Tick: len(g.held) == 0}
	g.held = nil
	return d
}

func (g *gateManual) Skip(string) Decision { return Decision{} }
func (g *gateManual) Timer() Decision      { return Decision{} }

func (g *gateManual) Waiting() string {
	if len(g.held) == 0 {
		return "manual trigger pending"
	}
	return "manual trigger pending (" + itoa(len(g.held)) + " inputs held)"
}

// Wants nothing until the trigger: arrivals wait in their delivery buffers.
func (g *gateManual) Wants(string) bool { return false }

func (g *gateManual) cause() string { return CauseManualPending }

func (g *gateManual) evidence() map[string]string {
	return map[string]string{"held": itoa(len(g.held))}
}

var _ interface {
	Gate
	causer
} = (*gateManual)(nil)
