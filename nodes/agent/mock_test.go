package agent_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/nodes/agent"
)

func mockRun(t *testing.T, m *agent.Mock, node, prompt string) (*agent.Result, error) {
	t.Helper()
	return m.Run(context.Background(), &agent.Request{NodeID: node, Prompt: prompt}, nil)
}

func TestMockScriptSemantics(t *testing.T) {
	m, err := agent.ParseMock([]byte(`{
		"a": [{"status": "fail", "notes": "first"},
		      {"status": "success", "response": "second", "preferred_label": "Yes",
		       "suggested_next_ids": ["x"], "context_updates": {"k": "v"},
		       "usage": {"input_tokens": 10, "output_tokens": 5, "cost": 0.25}}],
		"c": [{"status": "needs_dod"}]
	}`))
	require.NoError(t, err)

	tests := []struct {
		name, node string
		check      func(t *testing.T, res *agent.Result)
	}{
		{"first entry", "a", func(t *testing.T, res *agent.Result) {
			require.Equal(t, "fail", res.Status)
			require.False(t, res.Success)
			require.Equal(t, "first", res.Notes)
			require.Equal(t, "[mock] a: fail", res.Text, "an entry without response gets a canned one")
		}},
		{"second entry", "a", func(t *testing.T, res *agent.Result) {
			require.True(t, res.Success)
			require.Equal(t, "second", res.Text)
			require.Equal(t, "Yes", res.PreferredLabel)
			require.Equal(t, []string{"x"}, res.SuggestedNextIDs)
			require.Equal(t, map[string]string{"k": "v"}, res.ContextUpdates)
			require.Equal(t, agent.Usage{InputTokens: 10, OutputTokens: 5, Cost: 0.25}, res.Usage)
		}},
		{"the last entry repeats", "a", func(t *testing.T, res *agent.Result) {
			require.Equal(t, "second", res.Text)
		}},
		{"custom status kept", "c", func(t *testing.T, res *agent.Result) {
			require.Equal(t, "needs_dod", res.Status)
		}},
		{"unlisted node", "b", func(t *testing.T, res *agent.Result) {
			require.True(t, res.Success)
			require.Equal(t, "success", res.Status)
			require.Contains(t, res.Text, "[mock] b: done: Do the thing (prompt ")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := mockRun(t, m, tc.node, "Goal: g\n\nDo the thing\nmore")
			require.NoError(t, err)
			tc.check(t, res)
		})
	}
	require.Equal(t, 3, m.Runs("a"))
	require.Equal(t, 1, m.Runs("b"))
}

func TestMockCannedResponseDependsOnPrompt(t *testing.T) {
	m := agent.NewMock(nil)
	r1, err := mockRun(t, m, "n", "Fix it")
	require.NoError(t, err)
	r2, err := mockRun(t, m, "n", "Fix it\n\nwith another context")
	require.NoError(t, err)
	require.NotEqual(t, r1.Text, r2.Text)
	require.Contains(t, r1.Text, "Fix it")
}

func TestMockErrors(t *testing.T) {
	tests := []struct {
		class     agent.Class
		retryable bool
	}{
		{agent.ClassRateLimit, true},
		{agent.ClassNetwork, true},
		{agent.ClassServer, true},
		{agent.ClassAuth, false},
		{agent.ClassBadRequest, false},
		{agent.ClassUnknown, false},
	}
	for _, tc := range tests {
		t.Run(string(tc.class), func(t *testing.T) {
			m := agent.NewMock(map[string][]agent.MockResult{"n": {{Error: string(tc.class)}, {Status: "success"}}})
			res, err := mockRun(t, m, "n", "p")
			require.Nil(t, res)
			var ae *agent.Error
			require.ErrorAs(t, err, &ae)
			require.Equal(t, tc.class, ae.Class)
			require.Equal(t, tc.retryable, ae.Retryable)
			require.Equal(t, tc.retryable, errors.Is(err, agent.ErrRetryable))
			require.Equal(t, !tc.retryable, errors.Is(err, agent.ErrTerminal))
			res, err = mockRun(t, m, "n", "p")
			require.NoError(t, err, "the next entry is taken after an error")
			require.True(t, res.Success)
		})
	}
}

func TestMockEvents(t *testing.T) {
	m := agent.NewMock(map[string][]agent.MockResult{"n": {{Response: "hi", Usage: &agent.MockUsage{InputTokens: 3, OutputTokens: 4, Cost: 0.5}}}})
	var evs []agent.Event
	res, err := m.Run(context.Background(), &agent.Request{NodeID: "n"}, func(ev agent.Event) { evs = append(evs, ev) })
	require.NoError(t, err)
	require.Equal(t, []agent.Event{{Kind: "text", Text: "hi"}, {Kind: "usage", Usage: res.Usage}}, evs)
}

func TestMockConcurrentCursor(t *testing.T) {
	script := map[string][]agent.MockResult{"n": {{Response: "1"}, {Response: "2"}, {Response: "3"}, {Response: "4"}}}
	m := agent.NewMock(script)
	const runs = 40
	var wg sync.WaitGroup
	texts := make(chan string, runs)
	for range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := m.Run(context.Background(), &agent.Request{NodeID: "n"}, nil)
			if err == nil {
				texts <- res.Text
			}
		}()
	}
	wg.Wait()
	close(texts)
	count := map[string]int{}
	for s := range texts {
		count[s]++
	}
	require.Equal(t, map[string]int{"1": 1, "2": 1, "3": 1, "4": runs - 3}, count, "each entry is taken once, the last repeats")
	require.Equal(t, runs, m.Runs("n"))
}

func TestMockHonoursCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := agent.NewMock(nil).Run(ctx, &agent.Request{NodeID: "n"}, nil)
	require.ErrorIs(t, err, context.Canceled)
}

func TestParseMockErrors(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"bad JSON", "{\n  \"a\": [{\"status\": \"fail\",}]\n}", "line 2, column"},
		{"not an object", `[1]`, "an object of node ids to lists of results"},
		{"unknown field", `{"a":[{"statuz":"x"}]}`, `unknown field "statuz"`},
		{"delay refused", `{"a":[{"delay":"1s"}]}`, "never sleeps"},
		{"empty list", `{"a":[]}`, `node "a" has an empty list`},
		{"bad status", `{"a":[{"status":"not good"}]}`, `a[0]: bad status "not good"`},
		{"unknown error", `{"a":[{"status":"success"},{"error":"meteor"}]}`, `a[1]: unknown error "meteor"`},
		{"negative usage", `{"a":[{"usage":{"input_tokens":-1}}]}`, "negative"},
		{"wrong type", `{"a":[{"status":1}]}`, "status must be a string"},
		{"empty file", ``, "empty file"},
		{"trailing data", `{} {}`, "after the JSON object"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := agent.ParseMock([]byte(tc.src))
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestLoadMockFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	require.NoError(t, os.WriteFile(good, []byte(`{"n":[{"status":"retry"}]}`), 0o644))
	m, err := agent.LoadMockFile(good)
	require.NoError(t, err)
	res, err := mockRun(t, m, "n", "p")
	require.NoError(t, err)
	require.Equal(t, "retry", res.Status)

	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"n":[{"status":"a b"}]}`), 0o644))
	_, err = agent.LoadMockFile(bad)
	require.ErrorContains(t, err, bad+": mock script")

	_, err = agent.LoadMockFile(filepath.Join(dir, "missing.json"))
	require.ErrorIs(t, err, os.ErrNotExist)
}
