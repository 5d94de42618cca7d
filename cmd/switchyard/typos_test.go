package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTyposAreErrors: what names nothing in the graph is refused before
// anything runs (exit 2), with what it could have meant.
func TestTyposAreErrors(t *testing.T) {
	dir := t.TempDir()
	mock := filepath.Join(dir, "mock.json")
	require.NoError(t, os.WriteFile(mock, []byte(`{"fetc": [{"status": "success"}]}`), 0o644))
	sessionDot := filepath.Join(dir, "ops.dot")
	require.NoError(t, os.WriteFile(sessionDot, []byte("digraph ops {\n graph [kind=\"session\"]\n a [prompt=\"x\"]\n b [prompt=\"y\"]\n a -> b\n}\n"), 0o644))
	for _, tc := range []struct {
		args []string
		says []string
	}{
		{[]string{"run", "../../examples/retry.dot", "--mock", mock},
			[]string{`--mock: the script names node "fetc", which is not in graph retry (did you mean "fetch"?)`}},
		{[]string{"run", "../../examples/human.dot", "--answer", "revew=A"},
			[]string{`--answer revew=...: no node "revew" in graph human (did you mean "review"?)`}},
		{[]string{"run", "../../examples/human.dot", "--answer", "draft=A"},
			[]string{"node draft is not a human gate (its human gates: review)"}},
		{[]string{"run", "../../examples/human.dot", "--answer", "review=A", "--answer", "review=Aprove"},
			[]string{`--answer review=Aprove: "Aprove" matches no option of human gate review: choose one of [A] Approve (publish), [R] Revise (draft) (did you mean "Approve"?)`}},
		{[]string{"run", sessionDot},
			[]string{`is a reactive session (kind="session")`, "switchyard serve " + sessionDot}},
		{[]string{"serve", "../../examples/human.dot", "--mock", mock},
			[]string{`the script names node "fetc"`}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			args := append(tc.args, "--data", t.TempDir(), "--logs", t.TempDir())
			if tc.args[0] == "serve" {
				args = append(tc.args, "--data", t.TempDir())
			}
			code, _, errOut := cli(t, args...)
			require.Equal(t, 2, code, "stderr: %s", errOut)
			for _, s := range tc.says {
				require.Contains(t, errOut, s)
			}
		})
	}
}

// TestRetryLinesSayWhy: a retry line names the failure that caused it.
func TestRetryLinesSayWhy(t *testing.T) {
	code, _, errOut := cli(t, "run", "../../examples/retry.dot", "--mock", "../../examples/retry.mock.json",
		"--data", t.TempDir(), "--logs", t.TempDir())
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `fetch +retry +attempt 1 failed: upstream returned 503; retrying in \d`, errOut)
	require.Regexp(t, `fetch +retry +attempt 2 failed: upstream returned 503; retrying in \d`, errOut)
}

// TestGateWithoutTerminalFails: with stdin not a terminal (here
// /dev/null, a character device as in cron or CI) and no --answer left, a
// human gate fails saying how to answer it, without prompting.
func TestGateWithoutTerminalFails(t *testing.T) {
	devnull, err := os.Open(os.DevNull)
	require.NoError(t, err)
	defer devnull.Close()
	var stdout, stderr strings.Builder
	f := &runFlags{durable: true, data: t.TempDir(), logs: t.TempDir(), provider: "mock"}
	err = runPipeline(context.Background(), f, "../../examples/human.dot", devnull, &stdout, &stderr)
	require.Error(t, err)
	require.Contains(t, stderr.String(), "human gate review has no answer: stdin is not a terminal to ask at and no --answer review=CHOICE is left (choose one of [A] Approve (publish), [R] Revise (draft))")
	require.NotContains(t, stderr.String(), "> ", "no console prompt")
	require.NotContains(t, stderr.String(), "SKIPPED")
}
