package actors

import (
	"encoding/json"
	"time"

	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// EventMap is the JSON form of an event, flat: kind, session, seq, time
// (RFC 3339), and when set node, status, attempts, duration_ms, edge,
// message, usage {input_tokens, output_tokens, cost}, then the event's
// attributes as keys of their own (never over the fields above). It is
// what sy.<session>.json.evt.<kind> carries and what `--json` prints.
func EventMap(ev *pb.Event) map[string]any {
	m := map[string]any{"kind": ev.GetKind(), "session": ev.GetSessionId(), "seq": ev.GetSeq()}
	if t := ev.GetTime(); t != nil {
		m["time"] = t.AsTime().UTC().Format(time.RFC3339Nano)
	}
	if ev.GetNode() != "" {
		m["node"] = ev.GetNode()
	}
	if ev.GetStatus() != "" {
		m["status"] = ev.GetStatus()
	}
	if ev.GetKind() == "node.completed" || ev.GetAttempts() > 0 {
		m["attempts"] = ev.GetAttempts()
	}
	if ev.GetDurationMs() != 0 || ev.GetKind() == "node.completed" {
		m["duration_ms"] = ev.GetDurationMs()
	}
	if ev.GetEdgeId() != "" {
		m["edge"] = ev.GetEdgeId()
	}
	if ev.GetMessage() != "" {
		m["message"] = ev.GetMessage()
	}
	if u := ev.GetUsage(); u != nil {
		m["usage"] = map[string]any{"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens, "cost": u.Cost}
	}
	for _, kv := range ev.GetAttrs() {
		if _, taken := m[kv.Key]; !taken {
			m[kv.Key] = kv.Value
		}
	}
	return m
}

// EventJSON encodes EventMap(ev).
func EventJSON(ev *pb.Event) ([]byte, error) { return json.Marshal(EventMap(ev)) }
