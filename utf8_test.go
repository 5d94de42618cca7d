package switchyard_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard"
	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/internal/brokertest"
)

// A handler's text that is not UTF-8 (a tool's binary output, a Go agent's
// truncated character) has each bad sequence replaced with U+FFFD where it
// leaves the handler: a durable pipeline records it, the next nodes read
// it, and its events reach a NATS subscriber as JSON.
func TestTextThatIsNotUTF8IsMadeValid(t *testing.T) {
	b := brokertest.Start(t)
	next := &echo{prefix: "next:"}
	g := switchyard.New("utf8").
		Agent("bad", switchyard.AgentFunc(func(context.Context, switchyard.Message) (switchyard.Message, error) {
			return switchyard.Message{Text: "bin\xff\xfe|\xe2\x82"}, nil
		})).
		Node("tool", map[string]string{"shape": "parallelogram", "tool_command": `printf 'a\377b'`}).
		Agent("next", next).
		Chain("bad", "tool", "next")

	events := make(chan *nats.Msg, 64)
	sub, err := b.Conn().ChanSubscribe(broker.JSONEvent("utf8-1", "node.completed"), events)
	require.NoError(t, err)
	defer func() { _ = sub.Unsubscribe() }()
	require.NoError(t, b.Conn().Flush())

	rep, err := switchyard.Run(testCtx(t), g, switchyard.Message{Text: "in"}, switchyard.WithBroker(b),
		switchyard.WithSessionID("utf8-1"), switchyard.WithWorkDir(t.TempDir()))
	require.NoError(t, err, "a durable checkpoint of the text")
	require.Equal(t, "success", rep.Status, rep.Reason)
	require.Equal(t, "bin\uFFFD|\uFFFD", rep.Node("bad").Output)
	require.Equal(t, "a\uFFFDb", rep.Node("tool").Output)
	require.Equal(t, "a\uFFFDb", next.seen[0].Text)
	require.Equal(t, "next:a\uFFFDb", rep.Result.Text)

	completed := map[string]bool{}
	deadline := time.After(10 * time.Second)
	for len(completed) < 3 {
		select {
		case m := <-events:
			var ev struct{ Node string }
			require.NoError(t, json.Unmarshal(m.Data, &ev), "%q", m.Data)
			completed[ev.Node] = true
		case <-deadline:
			t.Fatalf("node.completed in JSON for %v only", completed)
		}
	}
}

// The same in a reactive session: an outside event fires a node whose
// text is not UTF-8, and the node it goes on to reads the replaced text.
func TestSessionTextThatIsNotUTF8IsMadeValid(t *testing.T) {
	next := newRecorder()
	g := switchyard.New("utf8s", switchyard.GraphAttr("kind", "session")).
		Agent("bad", switchyard.AgentFunc(func(_ context.Context, in switchyard.Message) (switchyard.Message, error) {
			return switchyard.Message{Text: in.Text + "\xff"}, nil
		})).
		Agent("next", next).
		Edge("bad", "next")
	ex, err := switchyard.Stream(testCtx(t), g, switchyard.Message{})
	require.NoError(t, err)
	defer ex.Close()
	require.NoError(t, ex.Publish(testCtx(t), "bad", switchyard.Message{Text: "event"}))
	next.wait(t)
	require.Equal(t, []string{"event\uFFFD"}, next.texts)
	require.NoError(t, ex.Publish(testCtx(t), "bad", switchyard.Message{Text: "again"}))
	next.wait(t)
	require.Equal(t, []string{"event\uFFFD", "again\uFFFD"}, next.texts, "the session goes on")
	rep := ex.Stop()
	require.Equal(t, "running", rep.Status)
}
