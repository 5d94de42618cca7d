package nodes_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/nodes"
)

func TestParseStatus(t *testing.T) {
	tests := []struct {
		in   string
		want nodes.Status
	}{
		{"success", nodes.StatusSuccess}, {" SUCCESS ", nodes.StatusSuccess}, {"pass", nodes.StatusSuccess},
		{"ok", nodes.StatusSuccess}, {"passed", nodes.StatusSuccess}, {"succeeded", nodes.StatusSuccess},
		{"fail", nodes.StatusFail}, {"failure", nodes.StatusFail}, {"Failed", nodes.StatusFail}, {"error", nodes.StatusFail},
		{"partial", nodes.StatusPartial}, {"partial_success", nodes.StatusPartial},
		{"retry", nodes.StatusRetry}, {"skipped", nodes.StatusSkipped},
		{"Needs_DoD", "needs_dod"}, {"", ""},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			require.Equal(t, tc.want, nodes.ParseStatus(tc.in))
		})
	}
}

func TestStatusIsSuccess(t *testing.T) {
	tests := []struct {
		s    nodes.Status
		want bool
	}{
		{nodes.StatusSuccess, true}, {nodes.StatusPartial, true}, {"needs_dod", true},
		{nodes.StatusFail, false}, {nodes.StatusRetry, false}, {nodes.StatusSkipped, false}, {"", false},
	}
	for _, tc := range tests {
		t.Run(string(tc.s), func(t *testing.T) {
			require.Equal(t, tc.want, tc.s.IsSuccess())
		})
	}
}

func TestStatusFileRoundTrip(t *testing.T) {
	dir := t.TempDir()
	o := &nodes.Outcome{Status: nodes.StatusPartial, PreferredLabel: "Fix", SuggestedNextIDs: []string{"fix"},
		ContextUpdates: map[string]string{"k": "v"}, Notes: "n", FailureReason: "r"}
	require.NoError(t, nodes.WriteStatusFile(dir, o))
	sf, ok, err := nodes.ReadStatusFile(dir)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, &nodes.StatusFile{Outcome: "partial_success", PreferredLabel: "Fix", SuggestedNextIDs: []string{"fix"},
		ContextUpdates: map[string]string{"k": "v"}, Notes: "n", FailureReason: "r"}, sf)
	require.NoError(t, nodes.WriteStatusFile("", o), "no stage directory: nothing written")
}
