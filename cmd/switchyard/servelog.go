package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// serveLog is serve's default output: a live log for people, one line per
// notable event, stamped with the event's time and session. Every limit a
// node hits (firing caps and windows, budgets, stalls, refusals) and every
// envelope refused on the way in is a line.
type serveLog struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *serveLog) render(ev *pb.Event) {
	line := liveLine(ev)
	if line == "" {
		return
	}
	ts := ""
	if t := ev.GetTime(); t != nil {
		ts = t.AsTime().UTC().Format("2006-01-02 15:04:05") + " "
	}
	l.mu.Lock()
	fmt.Fprintf(l.w, "%s%s  %s\n", ts, ev.GetSessionId(), line)
	l.mu.Unlock()
}

// limitKinds are the events of a limit a node hit.
var limitKinds = map[string]bool{
	"iterations.exceeded": true, "iterations.waiting": true, "budget.threshold": true, "budget.exceeded": true,
	"stall.detected": true, "node.refused": true, "envelope.rejected": true, "goal_gate.unsatisfied": true,
	"session.fatal": true,
}

// liveLine is the text of an event in the live log ("" to leave it out).
func liveLine(ev *pb.Event) string {
	node := ev.GetNode()
	switch k := ev.GetKind(); {
	case k == "session.started":
		return "started: " + ev.GetMessage()
	case k == "session.resumed":
		return "resumed"
	case k == "session.completed":
		s := "completed: " + ev.GetStatus()
		if ev.GetMessage() != "" {
			s += ": " + firstLine(ev.GetMessage())
		}
		return s
	case k == "session.stopped":
		return "stopped"
	case k == "session.edited":
		return "edited: " + firstLine(ev.GetMessage())
	case k == "session.warning":
		return "warning: " + firstLine(ev.GetMessage())
	case k == "node.completed":
		s := fmt.Sprintf("%-20s %-16s %s", node, ev.GetStatus(), (time.Duration(ev.GetDurationMs()) * time.Millisecond).String())
		if m := firstLine(ev.GetMessage()); m != "" {
			if len(m) > 100 {
				m = m[:100] + "…"
			}
			s += "  " + m
		}
		return s
	case k == "node.retrying":
		return fmt.Sprintf("%-20s retrying after attempt %d: %s", node, ev.GetAttempts(), firstLine(ev.GetMessage()))
	case k == "human.question":
		var opts []string
		for _, kv := range ev.GetAttrs() {
			if key, ok := strings.CutPrefix(kv.Key, "option."); ok {
				opts = append(opts, "["+key+"] "+strings.TrimSpace(strings.TrimPrefix(kv.Value, "["+key+"]")))
			}
		}
		return fmt.Sprintf("%-20s asks: %s %s (switchyard answer %s %s CHOICE)", node, firstLine(ev.GetMessage()),
			strings.Join(opts, " "), ev.GetSessionId(), node)
	case k == "human.answer":
		return fmt.Sprintf("%-20s answered %q", node, ev.GetMessage())
	case k == "human.answer.refused":
		return fmt.Sprintf("%-20s answer refused: %s", node, firstLine(ev.GetMessage()))
	case limitKinds[k]:
		s := k
		if node != "" {
			s = fmt.Sprintf("%-20s %s", node, k)
		}
		return s + ": " + firstLine(ev.GetMessage())
	}
	return ""
}
