package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard/switchyard/actors"
	"github.com/switchyard/switchyard/nodes/agent"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// eventJSON is the JSON form of an event that `--json` prints, one object a
// line: the form of sy.<session>.json.evt.<kind> (actors.EventMap).
func eventJSON(ev *pb.Event) map[string]any { return actors.EventMap(ev) }

// jsonRenderer prints one JSON object per event. session.completed carries
// the session's total usage (the sum of its node.completed usages seen),
// when there was any.
type jsonRenderer struct {
	enc   *json.Encoder
	usage map[string]agent.Usage // by session
}

func newJSONRenderer(w io.Writer) *jsonRenderer {
	return &jsonRenderer{enc: json.NewEncoder(w), usage: map[string]agent.Usage{}}
}

func (r *jsonRenderer) render(ev *pb.Event) {
	m := eventJSON(ev)
	switch ev.GetKind() {
	case "node.completed":
		if u := ev.GetUsage(); u != nil {
			r.usage[ev.GetSessionId()] = r.usage[ev.GetSessionId()].Add(agent.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, Cost: u.Cost})
		}
	case "session.completed":
		if t, ok := r.usage[ev.GetSessionId()]; ok && m["usage"] == nil {
			m["usage"] = map[string]any{"input_tokens": t.InputTokens, "output_tokens": t.OutputTokens, "cost": t.Cost}
		}
		delete(r.usage, ev.GetSessionId())
	}
	_ = r.enc.Encode(m)
}

// textRenderer prints one line per node visit and the notable events, for
// people.
type textRenderer struct{ w io.Writer }

func (r *textRenderer) render(ev *pb.Event) {
	switch ev.GetKind() {
	case "session.started":
		fmt.Fprintf(r.w, "session %s: %s\n", ev.GetSessionId(), ev.GetMessage())
	case "session.resumed":
		fmt.Fprintf(r.w, "session %s resumed after %s\n", ev.GetSessionId(), ev.GetMessage())
	case "node.completed":
		line := fmt.Sprintf("  %-24s %-16s attempts=%d  %s", ev.GetNode(), ev.GetStatus(), ev.GetAttempts(),
			(time.Duration(ev.GetDurationMs()) * time.Millisecond).String())
		if ev.GetStatus() == "fail" && ev.GetMessage() != "" {
			line += "  " + firstLine(ev.GetMessage())
		}
		for _, kv := range ev.GetAttrs() {
			switch {
			case kv.Key == "continue" && kv.Value == "tick":
				line += "  (continues)"
			case kv.Key == "continue" && kv.Value == "wait":
				line += "  (waits for the next message: switchyard chat " + ev.GetSessionId() + " " + ev.GetNode() + ")"
			}
		}
		fmt.Fprintln(r.w, line)
	case "agent.reply":
		fmt.Fprintf(r.w, "  %-24s says: %s\n", ev.GetNode(), firstLine(ev.GetMessage()))
	case "node.retrying":
		why := firstLine(ev.GetMessage())
		if why == "" {
			why = "no reason given"
		}
		wait := ""
		for _, kv := range ev.GetAttrs() {
			if ms, err := strconv.ParseInt(kv.GetValue(), 10, 64); kv.GetKey() == "delay_ms" && err == nil {
				wait = " in " + (time.Duration(ms) * time.Millisecond).String()
			}
		}
		fmt.Fprintf(r.w, "  %-24s %-16s attempt %d failed: %s; retrying%s\n", ev.GetNode(), ev.GetStatus(), ev.GetAttempts(), why, wait)
	case "human.question":
		var opts []string
		for _, kv := range ev.GetAttrs() {
			if k, ok := strings.CutPrefix(kv.Key, "option."); ok {
				opts = append(opts, "["+k+"] "+strings.TrimSpace(strings.TrimPrefix(kv.Value, "["+k+"]")))
			}
		}
		// run answers from --answer, then the terminal (serve's log says
		// how to answer a served session).
		fmt.Fprintf(r.w, "  %-24s waiting for an answer: %s %s\n", ev.GetNode(), ev.GetMessage(), strings.Join(opts, " "))
	case "human.answer":
		fmt.Fprintf(r.w, "  %-24s answered %q\n", ev.GetNode(), ev.GetMessage())
	case "iterations.exceeded", "iterations.waiting", "budget.exceeded", "stall.detected", "node.refused",
		"goal_gate.unsatisfied", "envelope.rejected", "session.restarted":
		fmt.Fprintf(r.w, "  %s: %s\n", ev.GetKind(), ev.GetMessage())
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
