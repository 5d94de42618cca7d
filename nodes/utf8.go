package nodes

import (
	"strings"
	"unicode/utf8"
)

// ValidUTF8 replaces, in the outcome's text, each byte sequence that is
// not UTF-8 with U+FFFD; the runtime calls it on every outcome a handler
// returns. Protobuf strings are UTF-8: an outcome goes into envelopes, the
// journal, events and their JSON form, and a tool's binary output or a
// handler's truncated multi-byte character failed there — a checkpoint, an
// event's publication, a snapshot — far from the node that returned it.
// Valid text, the common case, is only scanned; the maps of an outcome
// that is not are copied, not changed.
func (o *Outcome) ValidUTF8() {
	if o == nil {
		return
	}
	valid(&o.PreferredLabel)
	valid(&o.Notes)
	valid(&o.FailureReason)
	valid(&o.Response)
	for i := range o.SuggestedNextIDs {
		valid(&o.SuggestedNextIDs[i])
	}
	o.ContextUpdates = validMap(o.ContextUpdates)
	o.Metadata = validMap(o.Metadata)
}

func valid(s *string) {
	if !utf8.ValidString(*s) {
		*s = strings.ToValidUTF8(*s, "\uFFFD")
	}
}

// validMap is m with its keys and values valid UTF-8: m itself when they
// are, a copy otherwise (the handler's map is not changed).
func validMap(m map[string]string) map[string]string {
	ok := true
	for k, v := range m {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			ok = false
			break
		}
	}
	if ok {
		return m
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		valid(&k)
		valid(&v)
		out[k] = v
	}
	return out
}
