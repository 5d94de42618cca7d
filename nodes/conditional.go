package nodes

import (
	"context"
	"regexp"
	"strings"
)

// Conditional is the diamond's handler (DESIGN decision 1 and seed 002).
// Without a prompt it does no work and passes the previous node's outcome
// through, so that the diamond's edges route on it. With a prompt it runs
// its agent and reports the agent's verdict: an OUTCOME:PASS, SUCCESS or
// FAIL marker in the response, else the run's success.
type Conditional struct{ agents *agentRunner }

var _ Handler = (*Conditional)(nil)

// Handle passes through or runs the hybrid diamond's agent.
func (h *Conditional) Handle(ctx context.Context, in *Input) (*Outcome, error) {
	if strings.TrimSpace(in.Node.Attrs.String("prompt")) == "" {
		st := ParseStatus(in.Context["outcome"])
		if st == "" {
			st = StatusSuccess
		}
		return &Outcome{Status: st, PreferredLabel: in.Context["preferred_label"],
			Notes: "passed through the previous outcome"}, nil
	}
	res, o, err := h.agents.run(ctx, in)
	if err != nil || o != nil {
		return o, err
	}
	o = resultOutcome(res)
	if st, ok := DetectOutcomeMarker(res.Text); ok {
		o.Status = st
		if st == StatusFail && o.FailureReason == "" {
			o.FailureReason = "the agent reported OUTCOME:FAIL"
		} else if st != StatusFail {
			o.FailureReason = ""
		}
	}
	return h.agents.finish(in, res, o)
}

var markerRE = regexp.MustCompile(`(?i)\bOUTCOME\s*[:=]\s*(PASS|SUCCESS|FAIL)\b`)

// DetectOutcomeMarker finds OUTCOME:PASS, OUTCOME:SUCCESS or OUTCOME:FAIL
// (case-insensitive, ':' or '=') in an agent's text. FAIL wins when both
// kinds appear.
func DetectOutcomeMarker(text string) (Status, bool) {
	found := false
	for _, m := range markerRE.FindAllStringSubmatch(text, -1) {
		if strings.EqualFold(m[1], "FAIL") {
			return StatusFail, true
		}
		found = true
	}
	if found {
		return StatusSuccess, true
	}
	return "", false
}
