package scheduler

import (
	"errors"
	"strings"
)

// ErrStalled is the Wait.Err of a node stopped by stall detection (or of
// every node after a session stall timeout).
var ErrStalled = errors.New("scheduler: stalled")

// Result is what a handler run produced, as the scheduler sees it.
type Result struct {
	// InputHash identifies what the firing consumed (a hash of the
	// envelopes' kinds, senders, messages and structured payloads, never
	// their ids): equal hashes mean the same input.
	InputHash string
	// Tick: the firing consumed nothing but a clock tick or a trigger (a
	// cron time, a manual trigger). Such a firing is never evidence of a
	// stall, whatever it produced.
	Tick   bool
	Status string
	// OutputHash identifies the output (a hash of response and context
	// updates); equal hashes mean the same output.
	OutputHash string
	Failure    string
	Usage      Usage
}

// stallWindow remembers a node's last results that were all the same:
// the trailing run of equal keys, each "input=I status=S output=H" or
// "input=I status=S failure=F", at most after of them.
//
// The rule: a node stalls when its last `after` firings (stall_after,
// default 3) consumed the same input and produced the same outcome — the
// same status and the same output (response and context updates), or the
// same failure. Firings on a clock tick alone are not counted, and
// different inputs that get the same reply are not a stall. The last
// `after` keys are equal exactly when the trailing run of equal keys is
// that long, so the run is all a window keeps: one key for a node whose
// inputs differ (a session's events), which every journal record of the
// node carries (SnapshotOf), where a ring of the last three carried three.
type stallWindow struct {
	after int
	last  []string
	// room holds last while after is at most DefaultStallAfter: the
	// window and its keys in one allocation, changed in place.
	room [DefaultStallAfter]string
}

// stallFor is a node's stall window, made on first use from the node's
// stall_after; nil for a node the scheduler does not have or that is not
// watched for stalls (stall_after=0).
func (s *Scheduler) stallFor(node string) *stallWindow {
	if w := s.stalls[node]; w != nil {
		return w
	}
	nc := s.cfg.Nodes[node]
	if nc == nil || nc.StallAfter <= 0 || s.gates[node] == nil {
		return nil
	}
	w := &stallWindow{after: nc.StallAfter}
	w.last = w.room[:0]
	s.stalls[node] = w
	return w
}

// restore sets the window from last, a node's stall window as a journal
// or a snapshot gave it (oldest first): its trailing run of equal keys,
// at most after of them — an earlier version kept the last after keys,
// equal or not.
func (w *stallWindow) restore(last []string) {
	i := len(last)
	for i > 0 && last[i-1] == last[len(last)-1] && len(last)-i < w.after {
		i--
	}
	w.last = append(w.last[:0], last[i:]...)
}

// DefaultStallAfter is stall_after when unset.
const DefaultStallAfter = 3

// observe records a result and reports the repeating evidence when the
// last `after` results are the same.
func (w *stallWindow) observe(r Result) (stalled bool, evidence string) {
	if w.after <= 0 || r.Tick {
		return false, ""
	}
	key := "input=" + r.InputHash + " status=" + r.Status + " output=" + r.OutputHash
	if r.Failure != "" {
		key = "input=" + r.InputHash + " status=" + r.Status + " failure=" + r.Failure
	}
	switch n := len(w.last); {
	case n == 0 || w.last[n-1] != key:
		w.last = append(w.last[:0], key) // a new run (in place: no new array)
	case n < w.after:
		w.last = append(w.last, w.last[n-1]) // the run goes on (the same string)
	}
	if len(w.last) < w.after {
		return false, ""
	}
	ev := w.last[0]
	if len(ev) > 300 {
		ev = ev[:300]
	}
	return true, strings.TrimSpace(ev)
}
