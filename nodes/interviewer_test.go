package nodes_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/nodes"
)

var twoOptions = []nodes.Option{{Key: "A", Label: "[A] Approve", Target: "ship"}, {Key: "R", Label: "R) Revise", Target: "revise"}}

func TestAutoApprove(t *testing.T) {
	tests := []struct {
		name string
		q    nodes.Question
		want string
	}{
		{"first option", nodes.Question{Options: twoOptions}, "A"},
		{"confirm", nodes.Question{Type: nodes.Confirm, Options: twoOptions}, nodes.AnswerYes},
		{"no options", nodes.Question{Type: nodes.FreeText}, nodes.AnswerYes},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := nodes.AutoApprove{}.Ask(context.Background(), &tc.q)
			require.NoError(t, err)
			require.Equal(t, tc.want, a.Value)
			require.Equal(t, "auto-approve", a.By)
			require.False(t, a.At.IsZero())
		})
	}
}

func TestQueue(t *testing.T) {
	answers := map[string][]string{"g1": {"A", "R"}, "g2": {"x"}}
	q := nodes.NewQueue(answers)
	answers["g1"][0] = "changed" // the queue keeps its own copy
	ask := func(stage string) string {
		a, err := q.Ask(context.Background(), &nodes.Question{Stage: stage})
		require.NoError(t, err)
		return a.Value
	}
	require.Equal(t, "A", ask("g1"))
	require.Equal(t, "x", ask("g2"))
	require.Equal(t, "R", ask("g1"))
	require.Equal(t, nodes.AnswerSkipped, ask("g1"), "an empty queue skips")
	require.Equal(t, nodes.AnswerSkipped, ask("other"))
}

func TestQueueConcurrent(t *testing.T) {
	list := make([]string, 50)
	for i := range list {
		list[i] = "A"
	}
	q := nodes.NewQueue(map[string][]string{"g": list})
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := map[string]int{}
	for range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, _ := q.Ask(context.Background(), &nodes.Question{Stage: "g"})
			mu.Lock()
			got[a.Value]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	require.Equal(t, map[string]int{"A": 50, nodes.AnswerSkipped: 10}, got)
}

func TestCallbackAndRecording(t *testing.T) {
	cb := nodes.Callback(func(_ context.Context, q *nodes.Question) (*nodes.Answer, error) {
		return &nodes.Answer{Value: q.Options[1].Key, By: "cb"}, nil
	})
	rec := &nodes.Recording{Inner: cb}
	a, err := rec.Ask(context.Background(), &nodes.Question{Stage: "g", Options: twoOptions})
	require.NoError(t, err)
	require.Equal(t, "R", a.Value)
	ex := rec.Exchanges()
	require.Len(t, ex, 1)
	require.Equal(t, "g", ex[0].Question.Stage)
	require.Equal(t, a, ex[0].Answer)
}

func TestConsole(t *testing.T) {
	tests := []struct {
		name, input string
		q           nodes.Question
		want        string
		shows       []string
	}{
		{"key", "r\n", nodes.Question{Stage: "gate", Text: "Ship it?", Options: twoOptions}, "r",
			[]string{"[gate] Ship it?", "  [A] Approve\n", "  [R] Revise\n", "> "}},
		{"confirm yes", "yes\n", nodes.Question{Type: nodes.Confirm}, nodes.AnswerYes, []string{"(y/n)"}},
		{"confirm n", "N\n", nodes.Question{Type: nodes.Confirm}, nodes.AnswerNo, nil},
		{"multi select", "A, R\n", nodes.Question{Type: nodes.MultiSelect, Options: twoOptions}, "A, R", []string{"comma-separated"}},
		{"free text", "  some words  \n", nodes.Question{Type: nodes.FreeText}, "some words", []string{"answer >"}},
		{"last line without newline", "A", nodes.Question{Options: twoOptions}, "A", nil},
		{"end of input skips", "", nodes.Question{}, nodes.AnswerSkipped, nil},
		{"default shown", "A\n", nodes.Question{Default: "R", Timeout: 300e9, Options: twoOptions}, "A", []string{"(default R after 5m0s)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			a, err := nodes.Console(strings.NewReader(tc.input), &out).Ask(context.Background(), &tc.q)
			require.NoError(t, err)
			require.Equal(t, tc.want, a.Value)
			for _, s := range tc.shows {
				require.Contains(t, out.String(), s)
			}
		})
	}
}

// TestConsoleHonoursContext: Ask returns when ctx ends; the line typed
// afterwards answers the next question, and closing the input ends the
// reader.
func TestConsoleHonoursContext(t *testing.T) {
	pr, pw := io.Pipe()
	outR, outW := io.Pipe()
	c := nodes.Console(pr, outW)
	prompts := bufio.NewReader(outR)
	waitPrompt := func() {
		for {
			s, err := prompts.ReadString('>')
			require.NoError(t, err)
			if strings.HasSuffix(s, ">") {
				return
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := c.Ask(ctx, &nodes.Question{Stage: "g1", Options: twoOptions})
		errc <- err
	}()
	waitPrompt()
	cancel()
	go func() { _, _ = io.Copy(io.Discard, outR) }() // drain what follows
	require.ErrorIs(t, receive(t, errc), context.Canceled)

	_, err := c.Ask(ctx, &nodes.Question{Stage: "g1"})
	require.ErrorIs(t, err, context.Canceled, "a done context is not asked")

	answers := make(chan *nodes.Answer, 1)
	go func() {
		a, _ := c.Ask(context.Background(), &nodes.Question{Stage: "g2", Options: twoOptions})
		answers <- a
	}()
	_, err = pw.Write([]byte("R\n"))
	require.NoError(t, err)
	require.Equal(t, "R", receive(t, answers).Value)
	require.NoError(t, pw.Close())
	require.NoError(t, outW.Close())
}
