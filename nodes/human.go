package nodes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/edges"
	"github.com/switchyard/switchyard/graph"
)

// Human is the wait.human handler: it offers the node's outgoing edges as
// choices and routes on the answer (DESIGN decision 4: the outcome carries
// both the chosen edge's label and its target). The node's `timeout` is
// the question's: when it passes on Clock (or the node's deadline ends the
// wait) the answer is TIMEOUT, which takes human.default_choice, else
// asks for a retry. An answer that matches no option is refused (a
// human.answer.refused event naming the options) and the question is asked
// again, up to MaxRefusedAnswers times: it is never mapped to an option.
type Human struct {
	Interviewer Interviewer
	// Clock times the question's timeout; nil is the real clock.
	Clock clock.Clock
}

var _ Handler = (*Human)(nil)

// Choices lists a gate's options: one per outgoing edge, its label (or
// target id) with an accelerator key.
func Choices(g *graph.Graph, node string) []Option {
	var out []Option
	for _, e := range g.Outgoing(node) {
		label := e.Label()
		if label == "" {
			label = e.To
		}
		key, _ := edges.Accelerator(label)
		out = append(out, Option{Key: key, Label: label, Target: e.To})
	}
	return out
}

// Match finds the option an answer names: its accelerator key (any case),
// its label, its normalised label, or its target id.
func Match(opts []Option, answer string) (Option, bool) {
	a := strings.TrimSpace(answer)
	if a == "" {
		return Option{}, false
	}
	for _, o := range opts {
		if strings.EqualFold(o.Key, a) {
			return o, true
		}
	}
	for _, o := range opts {
		if o.Label == a || edges.NormalizeLabel(o.Label) == edges.NormalizeLabel(a) || o.Target == a {
			return o, true
		}
	}
	return Option{}, false
}

// Handle asks the question and turns the answer into an outcome.
func (h *Human) Handle(ctx context.Context, in *Input) (*Outcome, error) {
	if h.Interviewer == nil {
		return &Outcome{Status: StatusFail, FailureReason: "no interviewer configured for human gates"}, nil
	}
	opts := Choices(in.Graph, in.Node.ID)
	qt, ok := ParseQuestionType(in.Node.Attrs.String("human.question_type"))
	if !ok {
		return &Outcome{Status: StatusFail, FailureReason: fmt.Sprintf("human.question_type %q: want single_select, multi_select, free_text or confirm",
			in.Node.Attrs.String("human.question_type"))}, nil
	}
	if len(opts) == 0 && qt != FreeText {
		return &Outcome{Status: StatusFail, FailureReason: "human gate " + in.Node.ID + " has no outgoing edges to choose from"}, nil
	}
	def := in.Node.Attrs.String("human.default_choice")
	if def == "" {
		def = in.Node.Attrs.String("default_choice")
	}
	q := &Question{ID: in.AttemptID, Stage: in.Node.ID, Text: in.Node.Label(), Type: qt, Options: opts, Default: def}
	if d, ok := in.Node.Attrs.Duration("timeout"); ok {
		q.Timeout = d
	}
	if p := in.Node.Attrs.String("prompt"); p != "" {
		q.Text = in.Prompt
	}
	emit(in, "human.question", q.Text, func(f map[string]any) {
		f["type"] = string(q.Type)
		for _, o := range q.Options {
			f["option."+o.Key] = o.Label
		}
	})
	updates := map[string]string{}
	var a *Answer
	var choice Option
	for refused := 0; ; refused++ {
		var err error
		if a, err = h.ask(ctx, q); err != nil {
			return nil, err
		}
		if a.Value == "" && a.Text != "" {
			a.Value = a.Text
		}
		emit(in, "human.answer", a.Value, func(f map[string]any) { f["by"] = a.By })
		clear(updates)
		if a.By != "" {
			updates["human.gate.answered_by"] = a.By
		}
		if !a.At.IsZero() {
			updates["human.gate.answered_at"] = a.At.UTC().Format(time.RFC3339)
		}
		switch a.Value {
		case AnswerTimeout:
			if def == "" {
				return &Outcome{Status: StatusRetry, FailureReason: "the question timed out with no default choice", ContextUpdates: updates}, nil
			}
			a = &Answer{Value: def, By: "default", At: a.At}
			updates["human.gate.timed_out"] = "true"
			updates["human.gate.answered_by"] = "default"
		case AnswerSkipped, "":
			return &Outcome{Status: StatusFail, FailureReason: "no answer for human gate " + in.Node.ID, ContextUpdates: updates}, nil
		}
		if qt == FreeText {
			updates["human.gate.text"] = a.Text
			if len(opts) == 0 {
				return &Outcome{Status: StatusSuccess, ContextUpdates: updates, Response: a.Text}, nil
			}
		}
		var ok bool
		if choice, ok = resolve(qt, opts, a, updates); ok {
			break
		}
		// An answer that matches no option is refused, never mapped to
		// an option: the question stays open.
		why := UnmatchedAnswer(in.Node.ID, opts, a.Value).Error()
		emit(in, "human.answer.refused", why, func(f map[string]any) { f["answer"] = a.Value; f["by"] = a.By })
		if a.By == "default" {
			return &Outcome{Status: StatusFail, FailureReason: "human.default_choice: " + why, ContextUpdates: updates}, nil
		}
		if refused+1 >= MaxRefusedAnswers {
			return &Outcome{Status: StatusFail, FailureReason: fmt.Sprintf("%d answers matched no option: %s", refused+1, why), ContextUpdates: updates}, nil
		}
	}
	updates["human.gate.selected"] = choice.Key
	updates["human.gate.label"] = choice.Label
	return &Outcome{Status: StatusSuccess, PreferredLabel: choice.Label, SuggestedNextIDs: []string{choice.Target},
		ContextUpdates: updates, Response: choice.Label}, nil
}

// MaxRefusedAnswers is how many answers matching no option a human gate
// refuses (asking again each time) before it fails.
const MaxRefusedAnswers = 10

// resolve finds the option an answer chooses (recording multi-select
// choices in updates).
func resolve(qt QuestionType, opts []Option, a *Answer, updates map[string]string) (Option, bool) {
	choice, ok := Match(opts, a.Value)
	if len(a.Selected) > 0 {
		// The interviewer chose options itself: trust them when they are
		// the gate's.
		if o, found := Match(opts, a.Selected[0].Target); found {
			choice, ok = o, true
		}
		if qt == MultiSelect {
			var keys []string
			for _, sel := range a.Selected {
				if o, found := Match(opts, sel.Target); found {
					keys = append(keys, o.Key)
				}
			}
			updates["human.gate.selected_all"] = strings.Join(keys, ",")
		}
	}
	if !ok && qt == MultiSelect {
		var keys []string
		for _, part := range strings.Split(a.Value, ",") {
			o, found := Match(opts, part)
			if !found {
				return Option{}, false // every part must name an option
			}
			keys = append(keys, o.Key)
			if !ok {
				choice, ok = o, true
			}
		}
		updates["human.gate.selected_all"] = strings.Join(keys, ",")
	}
	if !ok && qt == Confirm && len(opts) > 0 {
		switch strings.ToUpper(strings.TrimSpace(a.Value)) {
		case AnswerYes, "Y":
			choice, ok = opts[0], true
		case AnswerNo, "N":
			if len(opts) > 1 {
				choice, ok = opts[1], true
			}
		}
	}
	if !ok && qt == FreeText && len(opts) > 0 && strings.TrimSpace(a.Value) != "" {
		// Free text is the content, not a choice: it follows the first
		// edge unless it names another.
		choice, ok = opts[0], true
	}
	return choice, ok
}

// CheckAnswer reports whether answer chooses an option of a question of
// type qt (free text takes anything); the error lists the options.
func CheckAnswer(node string, qt QuestionType, opts []Option, answer string) error {
	if qt == FreeText && strings.TrimSpace(answer) != "" {
		return nil
	}
	if _, ok := resolve(qt, opts, &Answer{Value: answer}, map[string]string{}); ok {
		return nil
	}
	return UnmatchedAnswer(node, opts, answer)
}

// UnmatchedAnswer is the refusal of an answer that matches no option.
func UnmatchedAnswer(node string, opts []Option, answer string) error {
	return fmt.Errorf("%q matches no option of human gate %s: choose one of %s", answer, node, OptionList(opts))
}

// OptionList spells a gate's options, each as its key, its label and
// (in parentheses) its target: "[Y] Yes (yes), [N] No (no)".
func OptionList(opts []Option) string {
	parts := make([]string, 0, len(opts))
	for _, o := range opts {
		_, rest := edges.Accelerator(o.Label)
		label := rest
		if o.Key != "" {
			label = "[" + o.Key + "] " + rest
		}
		parts = append(parts, label+" ("+o.Target+")")
	}
	return strings.Join(parts, ", ")
}

// ParseQuestionType reads a question type: ours (single_select,
// multi_select, free_text, confirm) or the spec's names (multiple_choice,
// freeform, yes_no, confirmation), in any case; "" is single_select.
func ParseQuestionType(s string) (QuestionType, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "single_select", "single", "multiple_choice", "choice":
		return SingleSelect, true
	case "multi_select", "multi":
		return MultiSelect, true
	case "free_text", "freeform", "free_form", "text":
		return FreeText, true
	case "confirm", "confirmation", "yes_no":
		return Confirm, true
	}
	return "", false
}

// ask asks the interviewer, answering TIMEOUT when the question's timeout
// passes on the clock or the node's deadline ends the wait first.
func (h *Human) ask(ctx context.Context, q *Question) (*Answer, error) {
	clk := h.Clock
	if clk == nil {
		clk = clock.Real()
	}
	var timedOut atomic.Bool
	if q.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		t := clk.AfterFunc(q.Timeout, func() {
			timedOut.Store(true)
			cancel()
		})
		defer t.Stop()
	}
	a, err := h.Interviewer.Ask(ctx, q)
	switch {
	case err != nil && (timedOut.Load() || q.Timeout > 0 && errors.Is(err, context.DeadlineExceeded)):
		return &Answer{Value: AnswerTimeout, At: clk.Now()}, nil
	case err != nil:
		return nil, err
	case a == nil:
		return &Answer{Value: AnswerSkipped, At: clk.Now()}, nil
	}
	if a.At.IsZero() {
		a.At = clk.Now()
	}
	return a, nil
}

// emit publishes a handler event, if the runtime gave a way to.
func emit(in *Input, kind, message string, fill func(map[string]any)) {
	if in.Emit == nil {
		return
	}
	f := map[string]any{"message": message}
	if fill != nil {
		fill(f)
	}
	in.Emit(kind, f)
}
