package nodes

import (
	"encoding/json"
	"strings"
)

// InputText is the text of the envelopes that fired a node, as agents,
// tools and the `$input` prompt template see it: every message with text,
// in arrival order, joined by a blank line ("\n\n"). Messages without
// text (a cron tick, a trigger) contribute nothing.
func InputText(msgs []Message) string {
	var b strings.Builder
	for _, m := range msgs {
		if m.Text == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(m.Text)
	}
	return b.String()
}

// InputMessages is the list form of a firing's messages for tools: one
// object per message with its id, kind, sender (from), edge, text and
// structured payload (when it has one).
func InputMessages(msgs []Message) []map[string]any {
	out := make([]map[string]any, 0, len(msgs))
	for _, m := range msgs {
		o := map[string]any{"id": m.ID, "kind": m.Kind, "from": m.From, "edge": m.Edge, "text": m.Text}
		if m.Structured != nil {
			o["structured"] = m.Structured
		}
		out = append(out, o)
	}
	return out
}

// inputMessagesJSON is InputMessages as JSON of at most max bytes: the
// texts are cut when the whole would be longer; "[]" when it cannot be.
func inputMessagesJSON(msgs []Message, max int) string {
	list := InputMessages(msgs)
	b, err := json.Marshal(list)
	if err == nil && len(b) > max && len(list) > 0 {
		each := max / (2 * len(list))
		for _, o := range list {
			o["text"] = truncate(o["text"].(string), each)
			delete(o, "structured")
		}
		b, err = json.Marshal(list)
	}
	if err != nil || len(b) > max {
		return "[]"
	}
	return string(b)
}

// ExpandInput replaces `$input` in a prompt with InputText.
func ExpandInput(prompt string, msgs []Message) string {
	if !strings.Contains(prompt, "$input") {
		return prompt
	}
	return strings.ReplaceAll(prompt, "$input", InputText(msgs))
}
