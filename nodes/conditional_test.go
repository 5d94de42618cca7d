package nodes_test

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/nodes/agent"
)

func TestDetectOutcomeMarker(t *testing.T) {
	tests := []struct {
		text string
		want nodes.Status
		ok   bool
	}{
		{"All good. OUTCOME:PASS", nodes.StatusSuccess, true},
		{"OUTCOME:SUCCESS", nodes.StatusSuccess, true},
		{"outcome=success", nodes.StatusSuccess, true},
		{"Outcome = Pass", nodes.StatusSuccess, true},
		{"OUTCOME: FAIL because tests broke", nodes.StatusFail, true},
		{"outcome:fail", nodes.StatusFail, true},
		{"OUTCOME:PASS ... later OUTCOME:FAIL", nodes.StatusFail, true},
		{"OUTCOME:FAIL ... later OUTCOME:PASS", nodes.StatusFail, true},
		{"line one\nOUTCOME=PASS\n", nodes.StatusSuccess, true},
		{"no marker here", "", false},
		{"OUTCOMES:PASS", "", false},
		{"OUTCOME:PASSED", "", false},
		{"OUTCOME:MAYBE", "", false},
		{"", "", false},
		{"OUTCOME", "", false},
		{"OUTCOME:", "", false},
		{"XOUTCOME:PASS", "", false},
		{"my_outcome:fail", "", false},
		{"(OUTCOME : fail)", nodes.StatusFail, true},
		{"outcome:\nPASS", nodes.StatusSuccess, true},
		{"OUTCOME:PASS_ALL", "", false},
		{"OUTCOME:pass.", nodes.StatusSuccess, true},
		{"Outcome: unknown. OUTCOME=SUCCESS", nodes.StatusSuccess, true},
	}
	for _, tc := range tests {
		t.Run(tc.text, func(t *testing.T) {
			got, ok := nodes.DetectOutcomeMarker(tc.text)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, got)
		})
	}
}

const diamondGraph = `digraph c { start [shape=Mdiamond]; plain [shape=diamond]; hybrid [shape=diamond, prompt="Run the tests"]; exit [shape=Msquare]; start -> plain -> hybrid -> exit }`

// TestConditionalPassesThrough: a diamond without prompt returns the
// previous outcome unchanged (DESIGN decision 1).
func TestConditionalPassesThrough(t *testing.T) {
	tests := []struct {
		outcome, label string
		want           nodes.Status
	}{
		{"fail", "retry", nodes.StatusFail},
		{"success", "", nodes.StatusSuccess},
		{"partial_success", "", nodes.StatusPartial},
		{"needs_dod", "", "needs_dod"},
		{"", "", nodes.StatusSuccess},
	}
	for _, tc := range tests {
		t.Run(tc.outcome, func(t *testing.T) {
			g := load(t, diamondGraph)
			p := answering(&agent.Result{Text: "never", Success: false}, nil)
			r := registry(t, nodes.Deps{Providers: providers(p, nil)})
			in := input(t, g, "plain")
			in.Context["outcome"] = tc.outcome
			in.Context["preferred_label"] = tc.label
			o := handle(t, r, in)
			require.Equal(t, tc.want, o.Status)
			require.Equal(t, tc.label, o.PreferredLabel)
			require.Empty(t, p.reqs, "no agent runs")
		})
	}
}

// TestConditionalHybrid: a diamond with a prompt runs its agent and routes on
// its OUTCOME marker, else the run's success (seed 002).
func TestConditionalHybrid(t *testing.T) {
	tests := []struct {
		name string
		mock agent.MockResult
		want nodes.Status
	}{
		{"FAIL marker beats success", agent.MockResult{Response: "ran them. OUTCOME:FAIL"}, nodes.StatusFail},
		{"PASS marker beats failure", agent.MockResult{Status: "fail", Response: "OUTCOME=PASS"}, nodes.StatusSuccess},
		{"no marker: failure", agent.MockResult{Status: "fail", Response: "crashed"}, nodes.StatusFail},
		{"no marker: success", agent.MockResult{Response: "fine"}, nodes.StatusSuccess},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := load(t, diamondGraph)
			mock := agent.NewMock(map[string][]agent.MockResult{"hybrid": {tc.mock}})
			r := registry(t, nodes.Deps{Providers: providers(mock, nil)})
			in := input(t, g, "hybrid")
			in.Context["outcome"] = "success"
			o := handle(t, r, in)
			require.Equal(t, tc.want, o.Status)
			require.Equal(t, tc.want == nodes.StatusFail, o.FailureReason != "", o.FailureReason)
			require.Equal(t, 1, mock.Runs("hybrid"), "the hybrid diamond runs its agent")
			require.Equal(t, tc.mock.Response, o.Response)
			sf, ok, err := nodes.ReadStatusFile(in.StageDir)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, string(tc.want), sf.Outcome)
		})
	}
}

// referenceMarker is DetectOutcomeMarker written as a regular expression.
var referenceMarker = regexp.MustCompile(`(?i)\bOUTCOME\s*[:=]\s*(PASS|SUCCESS|FAIL)\b`)

func reference(text string) (nodes.Status, bool) {
	found := false
	for _, m := range referenceMarker.FindAllStringSubmatch(text, -1) {
		if strings.EqualFold(m[1], "fail") {
			return nodes.StatusFail, true
		}
		found = true
	}
	if found {
		return nodes.StatusSuccess, true
	}
	return "", false
}

// FuzzDetectOutcomeMarker checks the scanner against the regular expression.
func FuzzDetectOutcomeMarker(f *testing.F) {
	for _, s := range []string{"OUTCOME:PASS", "outcome = fail", "xoutcome:pass", "OUTCOME:\tSUCCESS!", "OUTCOMEOUTCOME:FAIL", "Outcome:Passed", "ooutcome=pass"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if !utf8.ValidString(text) {
			t.Skip() // the regexp reads invalid bytes as U+FFFD
		}
		gotS, gotOK := nodes.DetectOutcomeMarker(text)
		wantS, wantOK := reference(text)
		require.Equal(t, wantOK, gotOK, "%q", text)
		require.Equal(t, wantS, gotS, "%q", text)
	})
}
