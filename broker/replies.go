package broker

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/nats-io/nats.go"
)

// Replies on someone else's behalf. NATS does not check the reply subject
// of a publish against the publisher's permissions: an outside client may
// name a control subject (sy.<session>.ctl.trigger) as the reply subject
// of what it may publish, so that whoever answers — the runtime answering
// sy.*.ctl.explain, or the server acknowledging a publish on a session's
// stream (a PubAck) or reporting no responders (a 503 status) — publishes
// on that control subject with its own, wider, permissions. Two rules close
// this:
//
//   - the runtime answers only on reply inboxes (Respond);
//   - a control subscriber ignores what the server sent as an answer
//     (ServerReply).

// ReplyInbox reports whether subj is a reply inbox: _INBOX.… (clients) or
// RuntimeInboxPrefix.… (the runtime's own connections).
func ReplyInbox(subj string) bool {
	return strings.HasPrefix(subj, "_INBOX.") || strings.HasPrefix(subj, RuntimeInboxPrefix+".")
}

// Respond answers m on its reply subject when that is a reply inbox, and
// does nothing otherwise (no reply asked, or a reply subject that names
// another subject: a request must not make the runtime publish there).
func Respond(m *nats.Msg, data []byte) error {
	if !ReplyInbox(m.Reply) {
		return nil
	}
	return m.Respond(data)
}

// ServerReply reports whether m is an answer the server sent on a reply
// subject a publisher chose — a status message (no responders) or a
// JetStream response (a publish acknowledgement or an API error) — rather
// than a request: a control subscriber ignores it.
func ServerReply(m *nats.Msg) bool {
	if m.Header.Get("Status") != "" {
		return true
	}
	d := bytes.TrimSpace(m.Data)
	if len(d) == 0 || d[0] != '{' {
		return false
	}
	var r struct {
		Stream *string          `json:"stream"`
		Seq    *uint64          `json:"seq"`
		Error  *json.RawMessage `json:"error"`
		Type   *string          `json:"type"`
	}
	if json.Unmarshal(d, &r) != nil {
		return false
	}
	return (r.Stream != nil && r.Seq != nil) || (r.Error != nil && r.Type == nil && jsError(*r.Error)) ||
		(r.Type != nil && strings.HasPrefix(*r.Type, "io.nats.jetstream.api."))
}

// jsError reports whether raw is a JetStream API error object
// ({"code":…,"err_code":…,"description":…}).
func jsError(raw json.RawMessage) bool {
	var e struct {
		Code *int `json:"code"`
	}
	return json.Unmarshal(raw, &e) == nil && e.Code != nil
}
