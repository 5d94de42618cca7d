package nodes

import "strings"

// maxTextEvent is the most text one agent.text event carries.
const maxTextEvent = 4 << 10

// textEvents turns an agent's streamed text into agent.text progress
// events: pieces are gathered into whole lines (a model streams a few
// characters at a time) and sent when a line ends, when 4 KiB are
// waiting, before a tool call and at the end of the run.
type textEvents struct {
	emit func(kind string, fields map[string]any)
	buf  strings.Builder
}

func (t *textEvents) add(s string) {
	if t.emit == nil || s == "" {
		return
	}
	t.buf.WriteString(s)
	if t.buf.Len() >= maxTextEvent {
		t.flush()
		return
	}
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		all := t.buf.String()
		cut := strings.LastIndexByte(all, '\n') + 1
		t.emit("agent.text", map[string]any{"message": all[:cut]})
		t.buf.Reset()
		t.buf.WriteString(all[cut:])
	}
}

func (t *textEvents) flush() {
	if t.emit == nil || t.buf.Len() == 0 {
		return
	}
	t.emit("agent.text", map[string]any{"message": t.buf.String()})
	t.buf.Reset()
}
