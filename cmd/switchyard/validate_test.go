package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestValidateCommand runs `switchyard validate` over files written for
// each case and checks the exit status and the exact output.
func TestValidateCommand(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(src), 0o644))
		return p
	}
	good := write("good.dot", "digraph g {\n  start [shape=Mdiamond]\n  a [prompt=\"a\"]\n  exit [shape=Msquare]\n  start -> a -> exit\n}\n")
	warn := write("warn.dot", "digraph w {\n  start [shape=Mdiamond]\n  exit [shape=Msquare]\n  lost [prompt=\"x\"]\n  start -> exit\n}\n")
	bad := write("bad.dot", "digraph b {\n  start [shape=Mdiamond]\n  exit [shape=Msquare]\n  start -> exit [condition=\"outcome==x\"]\n}\n")
	syntax := write("syntax.dot", "digraph s {\n  a [label=\"x\" shape=box]\n}\n")
	empty := write("empty.dot", "")
	session := write("session.dot", "digraph s {\n  a [prompt=\"a\"]\n  b [prompt=\"b\"]\n  a -> b [dir=both]\n}\n")
	missing := filepath.Join(dir, "missing.dot")

	tests := []struct {
		name string
		args []string
		code int
		out  []string // lines of stdout, in order (nil: empty)
	}{
		{"a clean file prints nothing", []string{good}, 0, nil},
		{"warnings do not fail", []string{good, warn}, 0, []string{
			warn + ":4:3: warning: reachability: node lost is not reachable from the start node start"}},
		{"a lint error fails", []string{warn, bad}, 1, []string{
			warn + ":4:3: warning: reachability: node lost is not reachable from the start node start",
			bad + ":4:36: error: condition_syntax: edge start -> exit: condition \"outcome==x\": "}},
		{"a syntax error fails", []string{syntax}, 1, []string{
			syntax + ":2:16: error: missing_comma: expected ',' between attributes before \"shape\""}},
		{"an empty file fails", []string{empty}, 1, []string{
			empty + ":1:1: error: empty_input: the file is empty: expected digraph NAME { ... }"}},
		{"a missing file fails", []string{missing}, 1, []string{missing + ": error: read: "}},
		{"a session graph is a pipeline without --session", []string{session}, 1, []string{
			session + ":1:1: error: start_node: the graph has no start node (fix: add start [shape=Mdiamond])",
			session + ":1:1: error: terminal_node: the graph has no exit node (fix: add exit [shape=Msquare])"}},
		{"--session needs no start or exit", []string{"--session", session}, 0, nil},
		{"no file is a usage error", nil, 2, nil},
		{"an unknown flag is a usage error", []string{"--strict", good}, 2, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, _ := cli(t, append([]string{"validate"}, tt.args...)...)
			require.Equal(t, tt.code, code, "stdout:\n%s", out)
			if tt.code == 2 {
				return
			}
			var lines []string
			if out != "" {
				lines = strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			}
			require.Len(t, lines, len(tt.out), "stdout:\n%s", out)
			for i, want := range tt.out {
				// The tail of a message may come from another package
				// (edges/cond, the OS): a line must start with what is given.
				require.True(t, strings.HasPrefix(lines[i], want), "line %d:\n got %s\nwant %s…", i, lines[i], want)
			}
		})
	}
}

// TestValidateJSON checks the shape of `validate --json`: one array of
// every file's diagnostics with file, line, col, severity, rule, message and
// the node or edge.
func TestValidateJSON(t *testing.T) {
	dir := t.TempDir()
	warn := filepath.Join(dir, "warn.dot")
	require.NoError(t, os.WriteFile(warn, []byte("digraph w {\n  start [shape=Mdiamond]\n  exit [shape=Msquare]\n  lost [prompt=\"x\"]\n  start -> exit\n}\n"), 0o644))
	bad := filepath.Join(dir, "bad.dot")
	require.NoError(t, os.WriteFile(bad, []byte("digraph b {\n  start [shape=Mdiamond]\n  exit [shape=Msquare]\n  start -> exit -> ghost\n}\n"), 0o644))

	tests := []struct {
		name  string
		files []string
		code  int
		want  []map[string]any
	}{
		{"no diagnostics is an empty array", []string{"../../examples/hello.dot"}, 0, []map[string]any{}},
		{"diagnostics of several files", []string{warn, bad}, 1, []map[string]any{
			{"file": warn, "line": 4.0, "col": 3.0, "severity": "warning", "rule": "reachability", "node": "lost",
				"message": "node lost is not reachable from the start node start"},
			{"file": bad, "line": 4.0, "col": 12.0, "severity": "error", "rule": "exit_no_outgoing", "node": "exit",
				"edge_from": "exit", "edge_to": "ghost", "message": "the exit node exit has an outgoing edge to ghost"},
			{"file": bad, "line": 4.0, "col": 20.0, "severity": "error", "rule": "edge_target_exists", "node": "ghost",
				"message": `node "ghost" is used by an edge but never declared`, "fix": `ghost [label="..."]`},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, _ := cli(t, append([]string{"validate", "--json"}, tt.files...)...)
			require.Equal(t, tt.code, code, "stdout:\n%s", out)
			var got []map[string]any
			require.NoError(t, json.Unmarshal([]byte(out), &got), out)
			require.Equal(t, tt.want, got)
		})
	}
}

// TestUsageErrorsExit2: every usage error — an unknown flag or command, a
// flag value that cannot be parsed or names nothing valid (a session id
// that cannot be one, a negative duration...), missing arguments — exits
// 2, and says what is wrong, before anything runs or connects.
func TestUsageErrorsExit2(t *testing.T) {
	const dot = "../../examples/hello.dot"
	const url = "nats://127.0.0.1:1" // nothing listens: a usage error is found before connecting
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"run", dot, "--id", "a.>"}, `--id "a.>": invalid session id`},
		{[]string{"run", dot, "--id", "a b"}, `--id "a b": invalid session id`},
		{[]string{"run", dot, "--id", "*"}, "invalid session id"},
		{[]string{"run", dot, "--retain", "-1h"}, "--retain -1h0m0s"},
		{[]string{"run", dot, "--retain", "soon"}, "invalid argument"},
		{[]string{"run", dot, "--no-such-flag"}, "unknown flag"},
		{[]string{"run"}, "run takes one DOT file"},
		{[]string{"serve", dot, "--id", "a.>"}, `--id "a.>": invalid session id`},
		{[]string{"serve", dot, "--retain", "-5m"}, "--retain"},
		{[]string{"resume", "a.>"}, `session "a.>": invalid session id`},
		{[]string{"resume", "s1", "--from", "2", "--as", "x y"}, `--as "x y": invalid session id`},
		{[]string{"resume", "s1", "--from", "two"}, "invalid argument"},
		{[]string{"history", "a b"}, "invalid session id"},
		{[]string{"gc", "--retain", "-1s"}, "--retain"},
		{[]string{"explain", "s1", "a.>", "--nats", url}, `node "a.>": invalid node id`},
		{[]string{"explain", "s1", "n", "--nats", url, "--timeout", "0s"}, "--timeout 0s"},
		{[]string{"trigger", "s.1", "n", "--nats", url}, "invalid session id"},
		{[]string{"pub", "s1", "a b", "hi", "--nats", url}, "invalid node id"},
		{[]string{"answer", "s1", "*", "A", "--nats", url}, "invalid node id"},
		{[]string{"chat", "s1", "n", "--nats", url, "--wait", "0s"}, "--wait 0s"},
		{[]string{"stop", "s>"}, "invalid session id"},
		{[]string{"watch", "a.b"}, "invalid session id"},
		{[]string{"no-such-command"}, "unknown command"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, errOut := cli(t, tc.args...)
			require.Equal(t, 2, code, "stderr: %s", errOut)
			require.Contains(t, errOut, tc.says)
		})
	}
}
