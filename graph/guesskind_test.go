package graph

import (
	"strconv"
	"testing"
)

// TestGuessKindAsStrconv checks that the quick look at a value's first
// byte gives what parsing it would: whatever strconv accepts stays a
// number.
func TestGuessKindAsStrconv(t *testing.T) {
	parsed := func(text string) Kind {
		if _, err := strconv.Atoi(text); err == nil {
			return KindInt
		}
		if _, err := strconv.ParseFloat(text, 64); err == nil {
			return KindFloat
		}
		if text == "true" || text == "false" {
			return KindBool
		}
		return KindString
	}
	for _, text := range []string{"", "0", "12", "-3", "+4", "1.5", ".5", "-.5", "1e3", "0x1p-2", "1_000",
		"inf", "+Inf", "-INF", "infinity", "NaN", "nan", "n", "i", "true", "false", "True", "box", "agent",
		"10s", "x1", " 1", "1 ", "é", "ok"} {
		if got, want := guessKind(text), parsed(text); got != want {
			t.Errorf("guessKind(%q) = %v, strconv says %v", text, got, want)
		}
	}
}
