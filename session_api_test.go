package switchyard_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	switchyard "github.com/switchyard/switchyard"
)

// recorder is a Go agent that records its inputs and the messages of
// its state, and signals each firing.
type recorder struct {
	mu    sync.Mutex
	texts []string
	msgs  [][]switchyard.Received
	fired chan struct{}
}

func newRecorder() *recorder { return &recorder{fired: make(chan struct{}, 16)} }

func (r *recorder) Run(ctx context.Context, in switchyard.Message) (switchyard.Message, error) {
	r.mu.Lock()
	r.texts = append(r.texts, in.Text)
	r.msgs = append(r.msgs, switchyard.StateFrom(ctx).Messages())
	r.mu.Unlock()
	r.fired <- struct{}{}
	return switchyard.Message{Text: "seen: " + in.Text}, nil
}

func (r *recorder) wait(t *testing.T) {
	t.Helper()
	select {
	case <-r.fired:
	case <-time.After(20 * time.Second):
		t.Fatal("the agent did not fire")
	}
}

// TestGoSessionGetsOutsideEvents: a graph built in Go with kind=session
// has no implied start or exit; an outside event's text is a Go agent's
// input, a tool gets it as parameters, and a join's agent gets every
// envelope (joined, and each from State.Messages).
func TestGoSessionGetsOutsideEvents(t *testing.T) {
	triage, other, joined := newRecorder(), newRecorder(), newRecorder()
	params := make(chan map[string]any, 4)
	g := switchyard.New("alerts", switchyard.GraphAttr("kind", "session")).
		Agent("triage", triage).
		Agent("other", other).
		Tool("notify", switchyard.ToolFunc(func(_ context.Context, p map[string]any) (any, error) {
			params <- p
			return "sent", nil
		}), nil).
		Agent("both", joined, switchyard.Attr("trigger", "all")).
		Edge("triage", "notify").
		Edge("triage", "both").Edge("other", "both")
	ex, err := switchyard.Stream(testCtx(t), g, switchyard.Message{})
	require.NoError(t, err)
	defer ex.Close()
	require.Nil(t, ex.Graph().Node("start"), "no implied start in a session")
	require.Nil(t, ex.Graph().Node("exit"), "no implied exit in a session")

	require.NoError(t, ex.Publish(testCtx(t), "triage", switchyard.Message{Text: "disk full on db-1"}))
	triage.wait(t)
	require.Equal(t, []string{"disk full on db-1"}, triage.texts, "the event's text is the agent's input")
	require.Len(t, triage.msgs[0], 1)
	require.Equal(t, "", triage.msgs[0][0].From, "an outside event")

	select {
	case p := <-params:
		require.Equal(t, "seen: disk full on db-1", p["input"])
		msgs := p["messages"].([]map[string]any)
		require.Len(t, msgs, 1)
		require.Equal(t, "triage", msgs[0]["from"])
	case <-time.After(20 * time.Second):
		t.Fatal("the tool was not called")
	}

	require.NoError(t, ex.Publish(testCtx(t), "other", switchyard.Message{Text: "cpu at 99%"}))
	other.wait(t)
	joined.wait(t)
	require.Len(t, joined.msgs[0], 2, "a join fires on both envelopes")
	texts := []string{joined.msgs[0][0].Text, joined.msgs[0][1].Text}
	require.ElementsMatch(t, []string{"seen: disk full on db-1", "seen: cpu at 99%"}, texts)
	require.Equal(t, texts[0]+"\n\n"+texts[1], joined.texts[0], "several envelopes are joined by a blank line, in arrival order")

	require.Error(t, ex.Publish(testCtx(t), "nosuch", switchyard.Message{Text: "x"}))
	rep := ex.Stop()
	require.Equal(t, "running", rep.Status, "a session ends only when stopped")
}

// TestGoSessionEndsAtItsExit: a reactive session built in Go ends when
// its graph says so — at an exit node it adds itself, reached from what an
// outside event started — with the report of a completed run.
func TestGoSessionEndsAtItsExit(t *testing.T) {
	watch := newRecorder()
	g := switchyard.New("oneshot", switchyard.GraphAttr("kind", "session")).
		Agent("watch", watch).
		Node("done", map[string]string{"shape": "Msquare"}).
		Edge("watch", "done")
	ex, err := switchyard.Stream(testCtx(t), g, switchyard.Message{})
	require.NoError(t, err)
	defer ex.Close()
	require.Nil(t, ex.Graph().Node("exit"), "no implied exit")

	require.NoError(t, ex.Publish(testCtx(t), "watch", switchyard.Message{Text: "deploy finished"}))
	watch.wait(t)
	rep, err := ex.Wait(testCtx(t))
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status, "it completed at its exit: %s", rep.Reason)
	require.Equal(t, "seen: deploy finished", rep.Result.Text, "the output that reached the exit")
}

// TestPublishIntoARunningPipeline: Execution.Publish reaches a node of a
// running durable pipeline, which starts without a work stream (its
// input and hops go in process): the publish makes it.
func TestPublishIntoARunningPipeline(t *testing.T) {
	release := make(chan struct{})
	hold := switchyard.AgentFunc(func(ctx context.Context, in switchyard.Message) (switchyard.Message, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return switchyard.Message{}, ctx.Err()
		}
		return switchyard.Message{Text: "held"}, nil
	})
	b := newRecorder()
	g := switchyard.New("p").Agent("a", hold).Agent("b", b).Chain("a", "b")
	ex, err := switchyard.Stream(testCtx(t), g, switchyard.Message{Text: "in"})
	require.NoError(t, err)
	defer ex.Close()
	ctx, cancel := context.WithTimeout(testCtx(t), 5*time.Second)
	defer cancel()
	require.NoError(t, ex.Publish(ctx, "b", switchyard.Message{Text: "from outside"}))
	b.wait(t)
	b.mu.Lock()
	require.Len(t, b.msgs, 1)
	require.Len(t, b.msgs[0], 1)
	require.Equal(t, "from outside", b.msgs[0][0].Text, "the published message")
	require.Equal(t, "", b.msgs[0][0].From, "from outside the graph")
	b.mu.Unlock()
	close(release)
	b.wait(t)
	rep, err := ex.Wait(testCtx(t))
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status, rep.Reason)
}
