package edges

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Accelerator splits a choice label into its accelerator key and the rest:
// "[A] Approve", "A) Approve" and "A - Approve" give ("A", "Approve"); a
// bracketed key may be up to three characters ("[Esc] Cancel"). A label
// without such a prefix gives its first character as the key and itself,
// trimmed, as the rest. The empty label gives ("", "").
func Accelerator(label string) (key, rest string) {
	s := strings.TrimSpace(label)
	if k, r, ok := cutAccelerator(s); ok {
		return k, r
	}
	if s == "" {
		return "", ""
	}
	_, size := utf8.DecodeRuneInString(s)
	return s[:size], s
}

// cutAccelerator strips an accelerator prefix from a trimmed label.
func cutAccelerator(s string) (key, rest string, ok bool) {
	if strings.HasPrefix(s, "[") {
		if i := strings.IndexByte(s, ']'); i > 1 && utf8.RuneCountInString(s[1:i]) <= 3 && !strings.ContainsAny(s[1:i], " \t") {
			return s[1:i], strings.TrimSpace(s[i+1:]), true
		}
		return "", "", false
	}
	r, size := utf8.DecodeRuneInString(s)
	if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
		return "", "", false
	}
	after := s[size:]
	switch {
	case strings.HasPrefix(after, ") "):
		return s[:size], strings.TrimSpace(after[2:]), true
	case strings.HasPrefix(after, " - "):
		return s[:size], strings.TrimSpace(after[3:]), true
	}
	return "", "", false
}

// labelKey is a label trimmed, without its accelerator prefix, in its
// original case (compare with strings.EqualFold).
func labelKey(label string) string {
	s := strings.TrimSpace(label)
	if _, rest, ok := cutAccelerator(s); ok {
		return rest
	}
	return s
}

// NormalizeLabel is the form labels are matched in (spec 3.3 step 2):
// trimmed, without an accelerator prefix ("[Y] ", "Y) ", "Y - "),
// lowercased. "[Y] Yes", "Y) yes" and " YES " all normalise to "yes".
func NormalizeLabel(label string) string { return strings.ToLower(labelKey(label)) }
