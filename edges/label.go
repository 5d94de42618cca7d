package edges

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Accelerator splits a choice label into its accelerator key and the rest:
// "[A] Approve", "A) Approve" and "A - Approve" give ("A", "Approve"); a
// label without such a prefix gives its first character as the key.
func Accelerator(label string) (key, rest string) {
	s := strings.TrimSpace(label)
	if s == "" {
		return "", ""
	}
	if strings.HasPrefix(s, "[") {
		if i := strings.IndexByte(s, ']'); i > 1 && i <= 4 {
			return s[1:i], strings.TrimSpace(s[i+1:])
		}
	}
	r, size := utf8.DecodeRuneInString(s)
	if unicode.IsLetter(r) || unicode.IsDigit(r) {
		after := s[size:]
		if strings.HasPrefix(after, ")") {
			return string(r), strings.TrimSpace(after[1:])
		}
		if strings.HasPrefix(after, " - ") {
			return string(r), strings.TrimSpace(after[3:])
		}
	}
	return string(r), s
}

// NormalizeLabel is the form labels are matched in: lowercased, trimmed,
// accelerator prefix removed.
func NormalizeLabel(label string) string {
	s := strings.TrimSpace(label)
	if s == "" {
		return ""
	}
	if _, rest := Accelerator(s); rest != s {
		s = rest
	}
	return strings.ToLower(strings.TrimSpace(s))
}
