package nodes

import (
	"context"
	"github.com/switchyard/switchyard/graph"
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
	res, o, err := h.agents.run(ctx, in, nil)
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

// DetectOutcomeMarker finds OUTCOME:PASS, OUTCOME:SUCCESS or OUTCOME:FAIL
// (case-insensitive, ':' or '=', spaces allowed around it) as whole words
// in an agent's text. FAIL wins when both kinds appear.
func DetectOutcomeMarker(text string) (Status, bool) {
	found := false
	for i := 0; i < len(text); {
		j := strings.IndexAny(text[i:], "oO")
		if j < 0 {
			break
		}
		i += j
		if verdict, ok := markerAt(text, i); ok {
			if verdict == StatusFail {
				return StatusFail, true
			}
			found = true
		}
		i++
	}
	if found {
		return StatusSuccess, true
	}
	return "", false
}

// markerAt reads a marker starting at text[i].
func markerAt(text string, i int) (Status, bool) {
	const word = "outcome"
	if len(text)-i < len(word) || !strings.EqualFold(text[i:i+len(word)], word) || (i > 0 && isWordByte(text[i-1])) {
		return "", false
	}
	j := skipSpace(text, i+len(word))
	if j >= len(text) || (text[j] != ':' && text[j] != '=') {
		return "", false
	}
	j = skipSpace(text, j+1)
	k := j
	for k < len(text) && isWordByte(text[k]) {
		k++
	}
	switch v := text[j:k]; {
	case strings.EqualFold(v, "fail"):
		return StatusFail, true
	case strings.EqualFold(v, "pass"), strings.EqualFold(v, "success"):
		return StatusSuccess, true
	}
	return "", false
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r' || s[i] == '\f') {
		i++
	}
	return i
}

func isWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// Inline reports whether the diamond only routes (it has no prompt):
// then it never blocks.
func (h *Conditional) Inline(n *graph.Node) bool {
	return strings.TrimSpace(n.Attrs.String("prompt")) == ""
}

// Pure reports whether the diamond only routes (it has no prompt): then
// its outcome follows from the context alone.
func (h *Conditional) Pure(n *graph.Node) bool { return h.Inline(n) }
