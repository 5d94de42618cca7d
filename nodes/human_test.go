package nodes_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/clock"
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

func TestChoices(t *testing.T) {
	tests := []struct {
		name, edges string
		want        []nodes.Option
	}{
		{"bracket and paren keys", `g -> a [label="[A] Approve"]; g -> b [label="B) Back"]`,
			[]nodes.Option{{Key: "A", Label: "[A] Approve", Target: "a"}, {Key: "B", Label: "B) Back", Target: "b"}}},
		{"dash key", `g -> a [label="Y - Yes"]`, []nodes.Option{{Key: "Y", Label: "Y - Yes", Target: "a"}}},
		{"first character", `g -> a [label="Merge"]`, []nodes.Option{{Key: "M", Label: "Merge", Target: "a"}}},
		{"no label: the target id", `g -> a`, []nodes.Option{{Key: "a", Label: "a", Target: "a"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := load(t, `digraph c { start [shape=Mdiamond]; g [shape=hexagon]; a; b; exit [shape=Msquare]; start -> g; a -> exit; b -> exit; `+tc.edges+` }`)
			require.Equal(t, tc.want, nodes.Choices(g, "g"))
		})
	}
}

func TestMatch(t *testing.T) {
	opts := nodes.Choices(load(t, gateGraph), "gate")
	tests := []struct{ answer, want string }{
		{"A", "ship"}, {"a", "ship"}, {" r ", "revise"},
		{"[A] Approve", "ship"}, {"R) Revise", "revise"},
		{"approve", "ship"}, {"  REVISE ", "revise"},
		{"ship", "ship"}, {"revise", "revise"},
		{"maybe", ""}, {"", ""},
	}
	for _, tc := range tests {
		t.Run(tc.answer, func(t *testing.T) {
			o, ok := nodes.Match(opts, tc.answer)
			require.Equal(t, tc.want != "", ok)
			require.Equal(t, tc.want, o.Target)
		})
	}
}

// gate runs the gate of gateGraph, its default choice attribute replaced
// by attrs when they are given.
func gate(t *testing.T, iv nodes.Interviewer, attrs string) *nodes.Outcome {
	t.Helper()
	src := gateGraph
	if attrs != "" {
		src = strings.Replace(src, `human.default_choice="R"`, attrs, 1)
	}
	g := load(t, src)
	r := registry(t, nodes.Deps{Interviewer: iv})
	return handle(t, r, input(t, g, "gate"))
}

func answer(a *nodes.Answer) nodes.Interviewer {
	return nodes.Callback(func(context.Context, *nodes.Question) (*nodes.Answer, error) { return a, nil })
}

func TestHumanGateOutcome(t *testing.T) {
	tests := []struct {
		name   string
		iv     nodes.Interviewer
		attrs  string
		status nodes.Status
		next   string
		check  func(t *testing.T, o *nodes.Outcome)
	}{
		{"key answer: label and target (decision 4)", nodes.NewQueue(map[string][]string{"gate": {"a"}}), "", nodes.StatusSuccess, "ship",
			func(t *testing.T, o *nodes.Outcome) {
				require.Equal(t, "[A] Approve", o.PreferredLabel)
				require.Equal(t, "A", o.ContextUpdates["human.gate.selected"])
				require.Equal(t, "[A] Approve", o.ContextUpdates["human.gate.label"])
				require.Equal(t, "queue", o.ContextUpdates["human.gate.answered_by"])
				_, err := time.Parse(time.RFC3339, o.ContextUpdates["human.gate.answered_at"])
				require.NoError(t, err)
			}},
		{"label answer", answer(&nodes.Answer{Value: "Revise", By: "ann"}), "", nodes.StatusSuccess, "revise",
			func(t *testing.T, o *nodes.Outcome) {
				require.Equal(t, "ann", o.ContextUpdates["human.gate.answered_by"])
			}},
		{"target answer", answer(&nodes.Answer{Value: "revise"}), "", nodes.StatusSuccess, "revise", nil},
		{"selected option", answer(&nodes.Answer{Value: "?", Selected: []nodes.Option{{Target: "revise"}}}), "", nodes.StatusSuccess, "revise", nil},
		{"an unmatched answer is refused and asked again", nodes.NewQueue(map[string][]string{"gate": {"what?", "R"}}), "", nodes.StatusSuccess, "revise", nil},
		{"answers that never match fail, naming the options", answer(&nodes.Answer{Value: "what?"}), "", nodes.StatusFail, "",
			func(t *testing.T, o *nodes.Outcome) {
				require.Contains(t, o.FailureReason, `"what?" matches no option of human gate gate: choose one of [A] Approve (ship), [R] Revise (revise)`)
				require.Empty(t, o.SuggestedNextIDs, "never mapped to the first option")
			}},
		{"skipped fails", nodes.NewQueue(nil), "", nodes.StatusFail, "", nil},
		{"no answer at all fails", answer(nil), "", nodes.StatusFail, "", nil},
		{"auto-approve takes the first choice", nodes.AutoApprove{}, "", nodes.StatusSuccess, "ship",
			func(t *testing.T, o *nodes.Outcome) {
				require.Equal(t, "auto-approve", o.ContextUpdates["human.gate.answered_by"])
			}},
		{"timeout takes the default choice", answer(&nodes.Answer{Value: nodes.AnswerTimeout}), `human.default_choice="R", timeout=5m`, nodes.StatusSuccess, "revise",
			func(t *testing.T, o *nodes.Outcome) {
				require.Equal(t, "true", o.ContextUpdates["human.gate.timed_out"])
				require.Equal(t, "default", o.ContextUpdates["human.gate.answered_by"])
			}},
		{"default_choice also read without prefix", answer(&nodes.Answer{Value: nodes.AnswerTimeout}), `default_choice="revise"`, nodes.StatusSuccess, "revise", nil},
		{"timeout without default retries", answer(&nodes.Answer{Value: nodes.AnswerTimeout}), `timeout=5m`, nodes.StatusRetry, "", nil},
		{"no interviewer", nil, "", nodes.StatusFail, "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := gate(t, tc.iv, tc.attrs)
			require.Equal(t, tc.status, o.Status, o.FailureReason)
			if tc.next != "" {
				require.Equal(t, []string{tc.next}, o.SuggestedNextIDs)
			} else {
				require.Empty(t, o.SuggestedNextIDs)
			}
			if tc.check != nil {
				tc.check(t, o)
			}
		})
	}
}

func TestHumanGateWithoutEdgesFails(t *testing.T) {
	g := load(t, `digraph h { start [shape=Mdiamond]; gate [shape=hexagon]; exit [shape=Msquare]; start -> gate; start -> exit }`)
	r := registry(t, nodes.Deps{Interviewer: nodes.AutoApprove{}})
	o := handle(t, r, input(t, g, "gate"))
	require.Equal(t, nodes.StatusFail, o.Status)
	require.Contains(t, o.FailureReason, "no outgoing edges")
}

// blocking is an interviewer that waits for ctx, telling when it was asked.
func blocking(asked chan<- *nodes.Question) nodes.Interviewer {
	return nodes.Callback(func(ctx context.Context, q *nodes.Question) (*nodes.Answer, error) {
		asked <- q
		<-ctx.Done()
		return nil, ctx.Err()
	})
}

// TestHumanGateTimeoutOnClock: an interviewer that never answers is cut off
// by the question's timeout on the injected clock.
func TestHumanGateTimeoutOnClock(t *testing.T) {
	tests := []struct {
		name, attrs string
		status      nodes.Status
		next        []string
	}{
		{"default choice", `human.default_choice="R", timeout=5m`, nodes.StatusSuccess, []string{"revise"}},
		{"no default", `timeout=5m`, nodes.StatusRetry, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			asked := make(chan *nodes.Question, 1)
			g := load(t, strings.Replace(gateGraph, `human.default_choice="R"`, tc.attrs, 1))
			r := registry(t, nodes.Deps{Interviewer: blocking(asked), Clock: fake})
			h, _ := r.Lookup("wait.human")
			done := make(chan *nodes.Outcome, 1)
			go func() {
				o, err := h.Handle(context.Background(), input(t, g, "gate"))
				if err != nil {
					o = &nodes.Outcome{FailureReason: err.Error()}
				}
				done <- o
			}()
			q := receive(t, asked)
			require.Equal(t, 5*time.Minute, q.Timeout)
			fake.Advance(5*time.Minute - time.Second)
			select {
			case o := <-done:
				t.Fatalf("the gate ended before its timeout: %+v", o)
			default:
			}
			fake.Advance(time.Second)
			o := receive(t, done)
			require.Equal(t, tc.status, o.Status, o.FailureReason)
			require.Equal(t, tc.next, o.SuggestedNextIDs)
		})
	}
}

// TestHumanGateNodeDeadline: the node's deadline ending the wait counts as
// the question's timeout; a cancelled session is an error.
func TestHumanGateNodeDeadline(t *testing.T) {
	g := load(t, strings.Replace(gateGraph, `human.default_choice="R"`, `human.default_choice="R", timeout=1h`, 1))
	asked := make(chan *nodes.Question, 1)
	r := registry(t, nodes.Deps{Interviewer: blocking(asked), Clock: clock.NewFake(time.Now())})
	h, _ := r.Lookup("wait.human")

	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	go func() { <-asked }()
	o, err := h.Handle(ctx, input(t, g, "gate"))
	require.NoError(t, err)
	require.Equal(t, []string{"revise"}, o.SuggestedNextIDs)

	ctx, cancel = context.WithCancel(context.Background())
	go func() { <-asked; cancel() }()
	_, err = h.Handle(ctx, input(t, g, "gate"))
	require.ErrorIs(t, err, context.Canceled)
}

func TestQuestionTypes(t *testing.T) {
	tests := []struct {
		qtype  string
		answer *nodes.Answer
		next   string
		check  func(t *testing.T, o *nodes.Outcome)
	}{
		{"multi_select", &nodes.Answer{Value: "R,A"}, "revise", func(t *testing.T, o *nodes.Outcome) {
			require.Equal(t, "R,A", o.ContextUpdates["human.gate.selected_all"])
		}},
		{"multi_select", &nodes.Answer{Selected: []nodes.Option{{Target: "ship"}, {Target: "revise"}}, Value: "x"}, "ship", func(t *testing.T, o *nodes.Outcome) {
			require.Equal(t, "A,R", o.ContextUpdates["human.gate.selected_all"])
		}},
		{"free_text", &nodes.Answer{Text: "ship it, but add docs"}, "ship", func(t *testing.T, o *nodes.Outcome) {
			require.Equal(t, "ship it, but add docs", o.ContextUpdates["human.gate.text"])
		}},
		{"confirm", &nodes.Answer{Value: nodes.AnswerNo}, "revise", nil},
		{"confirm", &nodes.Answer{Value: "yes"}, "ship", nil},
		{"single_select", &nodes.Answer{Value: "R"}, "revise", nil},
	}
	for _, tc := range tests {
		t.Run(tc.qtype, func(t *testing.T) {
			rec := &nodes.Recording{Inner: answer(tc.answer)}
			o := gate(t, rec, `human.question_type="`+tc.qtype+`"`)
			require.Equal(t, nodes.StatusSuccess, o.Status, o.FailureReason)
			require.Equal(t, []string{tc.next}, o.SuggestedNextIDs)
			ex := rec.Exchanges()
			require.Len(t, ex, 1)
			require.Equal(t, nodes.QuestionType(tc.qtype), ex[0].Question.Type)
			require.Equal(t, "Ship it?", ex[0].Question.Text)
			require.Equal(t, "gate", ex[0].Question.Stage)
			if tc.check != nil {
				tc.check(t, o)
			}
		})
	}
	rec := nodes.NewRecording(nodes.AutoApprove{})
	gate(t, rec, "")
	require.Equal(t, nodes.SingleSelect, rec.Exchanges()[0].Question.Type, "single select by default")
}

func TestFreeTextWithoutEdges(t *testing.T) {
	g := load(t, `digraph h { start [shape=Mdiamond]; gate [shape=hexagon, human.question_type="free_text"]; exit [shape=Msquare]; start -> gate; start -> exit }`)
	r := registry(t, nodes.Deps{Interviewer: answer(&nodes.Answer{Text: "notes"})})
	o := handle(t, r, input(t, g, "gate"))
	require.Equal(t, nodes.StatusSuccess, o.Status)
	require.Equal(t, "notes", o.ContextUpdates["human.gate.text"])
	require.Equal(t, "notes", o.Response)
}

// receive waits for a value on ch, failing the test after 10 seconds.
func receive[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("nothing arrived within 10s")
		var zero T
		return zero
	}
}

func TestParseQuestionType(t *testing.T) {
	tests := []struct {
		in   string
		want nodes.QuestionType
		ok   bool
	}{
		{"", nodes.SingleSelect, true}, {"single_select", nodes.SingleSelect, true}, {"MULTIPLE_CHOICE", nodes.SingleSelect, true},
		{"multi_select", nodes.MultiSelect, true}, {"free_text", nodes.FreeText, true}, {"FREEFORM", nodes.FreeText, true},
		{"confirm", nodes.Confirm, true}, {"YES_NO", nodes.Confirm, true}, {"confirmation", nodes.Confirm, true},
		{"essay", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, ok := nodes.ParseQuestionType(tc.in)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, got)
		})
	}
	g, _ := loadLoose(t, strings.Replace(gateGraph, `human.default_choice="R"`, `human.question_type="essay"`, 1))
	o := handle(t, registry(t, nodes.Deps{Interviewer: nodes.AutoApprove{}}), input(t, g, "gate"))
	require.Equal(t, nodes.StatusFail, o.Status)
	require.Contains(t, o.FailureReason, "human.question_type")
}
