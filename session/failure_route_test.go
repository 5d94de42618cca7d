package session_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
)

// In a session a failed firing is not passed on as work: of its node's
// edges, only those that expect a failure (a condition such as
// outcome=fail, or a diamond, which routes on the outcome) carry it; an
// unconditional edge carries only the firings that did not fail.
// on_failure=route sends a failure along every edge whose condition holds.
func TestSessionFailureTakesOnlyFailureEdges(t *testing.T) {
	l := serve(t, `digraph s { kind="session"
		work [prompt="w"]; next [prompt="n"]; onfail [prompt="f"]; onok [prompt="k"]
		check [shape=diamond]; after_check [prompt="c"]
		routed [prompt="r", on_failure="route"]; routed_next [prompt="rn"]
		work -> next
		work -> onfail [condition="outcome=fail"]
		work -> onok [condition="outcome=success"]
		work -> check
		check -> after_check [condition="outcome=fail"]
		routed -> routed_next }`,
		`{"work":[{"status":"fail","response":"broken"},{"response":"fine"}],
		  "routed":[{"status":"fail","response":"broken"}]}`, nil)

	// The first firing fails: the failure edge and the diamond take it.
	l.publish(t, broker.NodeIn(l.s.ID(), "work"), "one")
	l.waitEvent(t, "onfail completed", completedBy("onfail"))
	l.waitEvent(t, "after_check completed", completedBy("after_check"))
	// The second succeeds: the unconditional and the success edges take it.
	l.publish(t, broker.NodeIn(l.s.ID(), "work"), "two")
	l.waitEvent(t, "next completed", completedBy("next"))
	l.waitEvent(t, "onok completed", completedBy("onok"))
	// on_failure=route: the failure follows the unconditional edge.
	l.publish(t, broker.NodeIn(l.s.ID(), "routed"), "three")
	l.waitEvent(t, "routed_next completed", completedBy("routed_next"))

	require.Equal(t, 1, l.calls_("next"), "only the successful firing reached next")
	require.Equal(t, []string{"handoff:fine"}, l.inputsOf("next"))
	require.Equal(t, 1, l.calls_("onfail"))
	require.Equal(t, 1, l.calls_("onok"))
	require.Equal(t, 1, l.calls_("after_check"), "the diamond passed only the failure on")
	require.Equal(t, 1, l.calls_("routed_next"))
}
