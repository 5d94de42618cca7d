package edges_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/edges"
)

func TestAccelerator(t *testing.T) {
	for _, tc := range []struct{ label, key, rest string }{
		{"[A] Approve", "A", "Approve"},
		{"  [A] Approve  ", "A", "Approve"},
		{"[a]Approve", "a", "Approve"},
		{"[Esc] Cancel", "Esc", "Cancel"},
		{"[F12] Help", "F12", "Help"},
		{"A) Approve", "A", "Approve"},
		{"1) First", "1", "First"},
		{"A - Approve", "A", "Approve"},
		{"Ü - Über", "Ü", "Über"},
		{"Approve", "A", "Approve"},
		{"  approve ", "a", "approve"},
		{"Ünder", "Ü", "Ünder"},
		{"[Long] Label", "[", "[Long] Label"}, // more than three characters: no key
		{"[a b] Label", "[", "[a b] Label"},   // no spaces in a key
		{"[] Empty", "[", "[] Empty"},         // no empty key
		{"A)pprove", "A", "A)pprove"},         // ") " needs its space
		{"A-Team", "A", "A-Team"},             // " - " needs its spaces
		{"(A) Approve", "(", "(A) Approve"},   // only letters and digits before )
		{"", "", ""},
		{"   ", "", ""},
	} {
		t.Run(tc.label, func(t *testing.T) {
			k, r := edges.Accelerator(tc.label)
			require.Equal(t, tc.key, k)
			require.Equal(t, tc.rest, r)
		})
	}
}

func TestNormalizeLabel(t *testing.T) {
	for _, tc := range []struct{ label, want string }{
		{"Approve", "approve"},
		{" [A] Approve ", "approve"},
		{"Y) Yes", "yes"},
		{"Y - Yes", "yes"},
		{"Ship It", "ship it"},
		{"  SHIP IT\t", "ship it"},
		{"[Esc] Cancel", "cancel"},
		{"A-Team", "a-team"},
		{"", ""},
	} {
		t.Run(tc.label, func(t *testing.T) {
			require.Equal(t, tc.want, edges.NormalizeLabel(tc.label))
		})
	}
}
