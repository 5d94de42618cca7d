package switchyard_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard"
)

// parityDOT is the graph parityGo builds, written in DOT: Go code bound to
// the node types.
const parityDOT = `digraph parity {
	goal="ship the release notes"
	start [shape=Mdiamond]
	draft [type="drafter"]
	lint [type="linter", on_failure=route]
	check [shape=diamond]
	approve [shape=hexagon, label="Ship?"]
	publish [type="publisher", input_key="draft", max_retries=1, retry_on_fail=true]
	summary [type="summarizer"]
	exit [shape=Msquare]
	start -> draft
	draft -> lint
	lint -> check
	check -> approve [condition="outcome=success"]
	check -> draft [condition="outcome=fail"]
	approve -> publish [label="[Y] Yes"]
	approve -> draft [label="[R] Revise"]
	publish -> summary
	summary -> exit
}`

// parityParts are the Go pieces both graphs run; each call makes fresh
// ones, so both runs start from the same state.
type parityParts struct {
	drafter    switchyard.Agent
	linter     switchyard.Tool
	lintParams switchyard.ParamMapper
	publisher  switchyard.Agent
	summarize  switchyard.Transform
}

func newParityParts() parityParts {
	var drafts, lints, publishes atomic.Int32
	return parityParts{
		drafter: switchyard.AgentFunc(func(_ context.Context, in switchyard.Message) (switchyard.Message, error) {
			n := drafts.Add(1)
			return switchyard.Message{Text: fmt.Sprintf("notes v%d", n), Metadata: map[string]string{"version": fmt.Sprint(n)}}, nil
		}),
		linter: switchyard.ToolFunc(func(_ context.Context, p map[string]any) (any, error) {
			if lints.Add(1) == 1 {
				return nil, errors.New("line 3: too long")
			}
			return map[string]any{"ok": true, "text": p["text"]}, nil
		}),
		lintParams: func(s switchyard.State) (map[string]any, error) {
			return map[string]any{"text": s.Output("draft")}, nil
		},
		publisher: switchyard.AgentFunc(func(_ context.Context, in switchyard.Message) (switchyard.Message, error) {
			if publishes.Add(1) == 1 {
				return switchyard.Message{}, errors.New("registry busy")
			}
			return switchyard.Message{Text: "published " + in.Text, Metadata: map[string]string{"channel": "stable"}}, nil
		}),
		summarize: func(s switchyard.State) (switchyard.Message, error) {
			return switchyard.Message{Text: s.Output("publish") + " (goal: " + s.Get("graph.goal") + ")"}, nil
		},
	}
}

func parityGo(p parityParts) *switchyard.Graph {
	return switchyard.New("parity", switchyard.Goal("ship the release notes")).
		Agent("draft", p.drafter).
		Tool("lint", p.linter, p.lintParams, switchyard.Attr("on_failure", "route")).
		Node("check", map[string]string{"shape": "diamond"}).
		Node("approve", map[string]string{"shape": "hexagon", "label": "Ship?"}).
		Agent("publish", p.publisher, switchyard.InputKey("draft"), switchyard.OnError(switchyard.Retry(1))).
		Output("summary", p.summarize).
		Chain("draft", "lint", "check").
		Edge("check", "approve", switchyard.When("outcome=success")).
		Edge("check", "draft", switchyard.When("outcome=fail")).
		Edge("approve", "publish", switchyard.Label("[Y] Yes")).
		Edge("approve", "draft", switchyard.Label("[R] Revise")).
		Chain("publish", "summary")
}

func parityDOTGraph(p parityParts) *switchyard.Graph {
	return switchyard.ParseDOT("parity.dot", []byte(parityDOT)).
		BindAgent("drafter", p.drafter).
		BindTool("linter", p.linter, p.lintParams).
		BindAgent("publisher", p.publisher).
		BindOutput("summarizer", p.summarize)
}

// trace is a session's events without what differs between two runs of
// the same graph (times, durations, session ids).
func trace(t *testing.T, g *switchyard.Graph) ([]string, *switchyard.Report) {
	t.Helper()
	var evs []string
	answers := []string{"R", "Y"} // revise once, then ship
	var asked atomic.Int32
	rep, err := switchyard.Run(testCtx(t), g, switchyard.Message{Text: "v1.4"},
		switchyard.WithSessionID("parity"),
		switchyard.WithBackoff(func(int) time.Duration { return 0 }),
		switchyard.WithAnswers(func(context.Context, *switchyard.Question) (*switchyard.Answer, error) {
			return &switchyard.Answer{Value: answers[asked.Add(1)-1]}, nil
		}),
		switchyard.WithHooks(switchyard.Hooks{OnEvent: func(ev switchyard.Event) {
			var attrs []string
			for k, v := range ev.Attrs {
				// The retry delay is jittered; the handler type is a name
				// (go.<id> for a Go node, the bound name in DOT).
				if k == "delay_ms" || k == "type" {
					continue
				}
				attrs = append(attrs, k+"="+v)
			}
			sort.Strings(attrs)
			evs = append(evs, fmt.Sprintf("%s|%s|%s|%s|%d|%q|%s", ev.Kind, ev.Node, ev.Edge, ev.Status, ev.Attempts, ev.Message, strings.Join(attrs, ",")))
		}}))
	require.NoError(t, err)
	return evs, rep
}

func TestGoAndDOTGraphsBehaveAlike(t *testing.T) {
	goEvents, goRep := trace(t, parityGo(newParityParts()))
	dotEvents, dotRep := trace(t, parityDOTGraph(newParityParts()))

	require.Equal(t, "success", goRep.Status, goRep.Reason)
	require.Equal(t, "published notes v3 (goal: ship the release notes)", goRep.Result.Text)
	require.Equal(t, map[string]string{"version": "3", "channel": "stable"}, goRep.Result.Metadata)
	require.Equal(t, 3, goRep.Node("draft").Visits, "lint failure, then a revision")
	require.Equal(t, 2, goRep.Node("publish").Attempts)

	// The journal's acknowledgements arrive while the next node runs:
	// checkpoint.saved events are compared as a set, the rest in order.
	goSaved, goRest := splitSaved(goEvents)
	dotSaved, dotRest := splitSaved(dotEvents)
	require.Equal(t, goRest, dotRest)
	require.Equal(t, goSaved, dotSaved)
	require.Equal(t, goRep.Result, dotRep.Result)
	require.Equal(t, len(goRep.Nodes), len(dotRep.Nodes))
	for i := range goRep.Nodes {
		a, b := goRep.Nodes[i], dotRep.Nodes[i]
		a.Duration, b.Duration = 0, 0
		require.Equal(t, a, b)
	}
}

func splitSaved(evs []string) (saved, rest []string) {
	for _, e := range evs {
		if strings.HasPrefix(e, "checkpoint.saved|") {
			saved = append(saved, e)
		} else {
			rest = append(rest, e)
		}
	}
	sort.Strings(saved)
	return saved, rest
}
