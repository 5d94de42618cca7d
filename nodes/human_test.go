package nodes_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/nodes"
)

const gateGraph = `digraph h {
	start [shape=Mdiamond]
	gate [shape=hexagon, label="Ship it?", human.default_choice="R"]
	ship [prompt="ship"]
	revise [prompt="revise"]
	exit [shape=Msquare]
	start -> gate
	gate -> ship [label="[A] Approve"]
	gate -> revise [label="R) Revise"]
	ship -> exit
	revise -> exit
}`

func TestChoicesAndMatching(t *testing.T) {
	g := load(t, gateGraph)
	opts := nodes.Choices(g, "gate")
	require.Equal(t, []nodes.Option{{Key: "A", Label: "[A] Approve", Target: "ship"}, {Key: "R", Label: "R) Revise", Target: "revise"}}, opts)
	for answer, want := range map[string]string{"A": "ship", "a": "ship", "[A] Approve": "ship", "approve": "ship",
		"Revise": "revise", "r": "revise", "revise": "revise"} {
		o, ok := nodes.Match(opts, answer)
		require.True(t, ok, answer)
		require.Equal(t, want, o.Target, answer)
	}
	_, ok := nodes.Match(opts, "maybe")
	require.False(t, ok)
}

func gate(t *testing.T, iv nodes.Interviewer, attrs string) *nodes.Outcome {
	src := gateGraph
	if attrs != "" {
		src = strings.Replace(src, `human.default_choice="R"`, attrs, 1)
	}
	g := load(t, src)
	r := registry(t, nodes.Deps{Interviewer: iv})
	return handle(t, r, input(t, g, "gate"))
}

func TestHumanGateOutcome(t *testing.T) {
	o := gate(t, nodes.NewQueue(map[string][]string{"gate": {"a"}}), "")
	require.Equal(t, nodes.StatusSuccess, o.Status)
	require.Equal(t, "[A] Approve", o.PreferredLabel, "decision 4: label and target")
	require.Equal(t, []string{"ship"}, o.SuggestedNextIDs)
	require.Equal(t, "A", o.ContextUpdates["human.gate.selected"])
	require.Equal(t, "[A] Approve", o.ContextUpdates["human.gate.label"])
	require.Equal(t, "queue", o.ContextUpdates["human.gate.answered_by"])
	require.NotEmpty(t, o.ContextUpdates["human.gate.answered_at"])

	o = gate(t, nodes.NewQueue(nil), "")
	require.Equal(t, nodes.StatusFail, o.Status, "no answer (SKIPPED) fails")

	o = gate(t, nodes.NewQueue(map[string][]string{"gate": {"what?"}}), "")
	require.Equal(t, []string{"ship"}, o.SuggestedNextIDs, "an unmatched answer takes the first choice")
	require.Equal(t, "what?", o.ContextUpdates["human.gate.unmatched_answer"])

	o = gate(t, nodes.AutoApprove{}, "")
	require.Equal(t, []string{"ship"}, o.SuggestedNextIDs)
}

func TestHumanGateTimeout(t *testing.T) {
	timeout := nodes.Callback(func(context.Context, *nodes.Question) (*nodes.Answer, error) {
		return &nodes.Answer{Value: nodes.AnswerTimeout}, nil
	})
	o := gate(t, timeout, `human.default_choice="R", timeout=5m`)
	require.Equal(t, []string{"revise"}, o.SuggestedNextIDs, "a timeout takes default_choice")
	require.Equal(t, "true", o.ContextUpdates["human.gate.timed_out"])

	o = gate(t, timeout, `timeout=5m`)
	require.Equal(t, nodes.StatusRetry, o.Status, "a timeout without default is RETRY")
}

func TestQuestionTypes(t *testing.T) {
	var asked []*nodes.Question
	rec := &nodes.Recording{Inner: nodes.Callback(func(_ context.Context, q *nodes.Question) (*nodes.Answer, error) {
		asked = append(asked, q)
		switch q.Type {
		case nodes.MultiSelect:
			return &nodes.Answer{Value: "R,A"}, nil
		case nodes.FreeText:
			return &nodes.Answer{Value: "ship it, but add docs", Text: "ship it, but add docs"}, nil
		case nodes.Confirm:
			return &nodes.Answer{Value: nodes.AnswerNo}, nil
		}
		return &nodes.Answer{Value: "A"}, nil
	})}
	o := gate(t, rec, `human.question_type="multi_select"`)
	require.Equal(t, "R,A", o.ContextUpdates["human.gate.selected_all"])
	require.Equal(t, []string{"revise"}, o.SuggestedNextIDs)
	o = gate(t, rec, `human.question_type="free_text"`)
	require.Equal(t, "ship it, but add docs", o.ContextUpdates["human.gate.text"])
	o = gate(t, rec, `human.question_type="confirm"`)
	require.Equal(t, []string{"revise"}, o.SuggestedNextIDs, "NO takes the second choice")
	o = gate(t, rec, "")
	require.Equal(t, nodes.SingleSelect, asked[len(asked)-1].Type)
	require.Equal(t, "Ship it?", asked[0].Text)
	require.Len(t, rec.Exchanges(), 4)
}

func TestConsoleInterviewer(t *testing.T) {
	var out bytes.Buffer
	c := nodes.Console(strings.NewReader("r\n"), &out)
	a, err := c.Ask(context.Background(), &nodes.Question{Stage: "gate", Text: "Ship it?",
		Options: []nodes.Option{{Key: "A", Label: "[A] Approve"}, {Key: "R", Label: "R) Revise"}}})
	require.NoError(t, err)
	require.Equal(t, "r", a.Value)
	require.Contains(t, out.String(), "[gate] Ship it?")
	require.Contains(t, out.String(), "[A] [A] Approve")

	c = nodes.Console(strings.NewReader("yes\n"), io.Discard)
	a, err = c.Ask(context.Background(), &nodes.Question{Type: nodes.Confirm})
	require.NoError(t, err)
	require.Equal(t, nodes.AnswerYes, a.Value)

	c = nodes.Console(strings.NewReader(""), io.Discard)
	a, err = c.Ask(context.Background(), &nodes.Question{})
	require.NoError(t, err)
	require.Equal(t, nodes.AnswerSkipped, a.Value, "end of input is no answer")

	pr, pw := io.Pipe()
	defer pw.Close()
	c = nodes.Console(pr, io.Discard)
	a, err = c.Ask(context.Background(), &nodes.Question{Timeout: time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, nodes.AnswerTimeout, a.Value)
}
