package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// cli runs the command in-process and returns its exit status and output.
func cli(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := execute(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// events parses --json output.
func events(t *testing.T, out string) []map[string]any {
	t.Helper()
	var evs []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), "line %q", sc.Text())
		evs = append(evs, m)
	}
	return evs
}

func completed(evs []map[string]any) []string {
	var out []string
	for _, e := range evs {
		if e["kind"] == "node.completed" {
			out = append(out, e["node"].(string)+"="+e["status"].(string))
		}
	}
	return out
}

// TestExamples runs every example the way the README says, with the mock
// provider, and checks what a user would check.
func TestExamples(t *testing.T) {
	for _, tc := range []struct {
		file string
		args []string
		want []string // node=status in completion order ("" = don't check order)
		code int
	}{
		{"hello.dot", nil, []string{"start=success", "greet=success", "exit=success"}, 0},
		{"branching.dot", []string{"--mock", "../../examples/branching.mock.json"},
			[]string{"start=success", "plan=success", "implement=fail", "check=fail", "fix=success", "implement=success", "check=success", "exit=success"}, 0},
		{"retry.dot", []string{"--mock", "../../examples/retry.mock.json"}, []string{"start=success", "fetch=success", "exit=success"}, 0},
		{"human.dot", []string{"--answer", "review=R", "--answer", "review=A"},
			[]string{"start=success", "draft=success", "review=success", "draft=success", "review=success", "publish=success", "exit=success"}, 0},
		{"human.dot", nil, []string{"start=success", "draft=success", "review=fail"}, 1},
		{"tool.dot", nil, []string{"start=success", "version=success", "count=success", "exit=success"}, 0},
		{"parallel.dot", nil, nil, 0},
		// auto mode: code continues on a tick, then again after the verifier's verdict.
		{"agents.dot", []string{"--mock", "../../examples/agents.mock.json"},
			[]string{"start=success", "plan=success", "code=success", "code=success", "verify=fail", "code=success", "verify=success", "exit=success"}, 0},
	} {
		t.Run(tc.file+strings.Join(tc.args, "_"), func(t *testing.T) {
			logs := t.TempDir()
			args := append([]string{"run", "../../examples/" + tc.file, "--json", "--logs", logs, "--data", t.TempDir()}, tc.args...)
			code, out, errOut := cli(t, args...)
			require.Equal(t, tc.code, code, "stderr: %s", errOut)
			evs := events(t, out)
			require.NotEmpty(t, evs)
			last := evs[len(evs)-1]
			require.Equal(t, "session.completed", last["kind"])
			wantStatus := "success"
			if tc.code != 0 {
				wantStatus = "fail"
			}
			require.Equal(t, wantStatus, last["status"])
			if tc.want != nil {
				require.Equal(t, tc.want, completed(evs))
			}
			for _, e := range evs {
				if e["kind"] == "node.completed" {
					require.GreaterOrEqual(t, e["attempts"].(float64), 1.0)
				}
			}
			_, err := os.Stat(filepath.Join(logs, "checkpoint.json"))
			require.NoError(t, err)
		})
	}
}

func TestRetryAttemptsInJSON(t *testing.T) {
	code, out, _ := cli(t, "run", "../../examples/retry.dot", "--json", "--mock", "../../examples/retry.mock.json",
		"--logs", t.TempDir(), "--data", t.TempDir())
	require.Equal(t, 0, code)
	for _, e := range events(t, out) {
		if e["kind"] == "node.completed" && e["node"] == "fetch" {
			require.Equal(t, 3.0, e["attempts"])
			return
		}
	}
	t.Fatal("no node.completed for fetch")
}

func TestParallelExampleRunsEveryBranchOnce(t *testing.T) {
	code, out, _ := cli(t, "run", "../../examples/parallel.dot", "--json", "--logs", t.TempDir(), "--data", t.TempDir())
	require.Equal(t, 0, code)
	got := completed(events(t, out))
	require.ElementsMatch(t, []string{"start=success", "fanout=success", "security=success", "style=success", "tests=success",
		"merge=success", "summary=success", "exit=success"}, got)
	require.Equal(t, "merge=success", got[5], "the fan-in runs after all three branches")
}

func TestHumanSummary(t *testing.T) {
	code, _, errOut := cli(t, "run", "../../examples/human.dot", "--answer", "review=A", "--logs", t.TempDir(), "--data", t.TempDir())
	require.Equal(t, 0, code)
	require.Contains(t, errOut, "review")
	require.Regexp(t, `publish\s+success\s+1\s+1`, errOut)
	require.Contains(t, errOut, ": success")
}

func TestInvalidDOTRunsNothing(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.dot")
	require.NoError(t, os.WriteFile(bad, []byte("digraph x {\n  start [shape=Mdiamond]\n  start -> work\n}\n"), 0o644))
	code, out, errOut := cli(t, "run", bad, "--json", "--logs", filepath.Join(dir, "logs"), "--data", t.TempDir())
	require.Equal(t, 2, code)
	require.Empty(t, out, "nothing ran")
	require.Contains(t, errOut, bad+":3:12: error: edge_target_exists")
	require.Contains(t, errOut, "error: terminal_node")
	_, err := os.Stat(filepath.Join(dir, "logs"))
	require.True(t, os.IsNotExist(err), "no run directory for an invalid file")
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"run"},
		{"run", "a.dot", "b.dot"},
		{"run", "../../examples/hello.dot", "--answer", "nochoice"},
		{"run", "../../examples/hello.dot", "--no-such-flag"},
		{"validate"},
	} {
		code, _, _ := cli(t, args...)
		require.Equal(t, 2, code, "%v", args)
	}
}

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	warn := filepath.Join(dir, "warn.dot")
	require.NoError(t, os.WriteFile(warn, []byte(`digraph w {
  start [shape=Mdiamond]
  exit [shape=Msquare]
  orphan [prompt="nobody reaches me"]
  start -> exit
}
`), 0o644))
	bad := filepath.Join(dir, "bad.dot")
	require.NoError(t, os.WriteFile(bad, []byte("digraph b {\n  a [label=\"x\" shape=box]\n}\n"), 0o644))

	code, out, _ := cli(t, "validate", "../../examples/hello.dot", warn)
	require.Equal(t, 0, code, "warnings do not fail")
	require.Equal(t, warn+":4:3: warning: reachability: node orphan is not reachable from the start node start\n", out)

	code, out, _ = cli(t, "validate", warn, bad)
	require.Equal(t, 1, code)
	require.Contains(t, out, bad+":2:16: error: missing_comma")

	code, out, _ = cli(t, "validate", "--json", bad)
	require.Equal(t, 1, code)
	var diags []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &diags))
	require.Equal(t, "missing_comma", diags[0]["rule"])
	require.Equal(t, 2.0, diags[0]["line"])
	require.Equal(t, 16.0, diags[0]["col"])
	require.Equal(t, "error", diags[0]["severity"])
}

func TestResumeFromRunDirectory(t *testing.T) {
	// A finished run resumes to the same result without running anything again.
	logs := t.TempDir()
	data := t.TempDir()
	code, _, _ := cli(t, "run", "../../examples/hello.dot", "--logs", logs, "--data", data)
	require.Equal(t, 0, code)
	code, out, _ := cli(t, "run", "../../examples/hello.dot", "--resume", logs, "--json", "--data", data)
	require.Equal(t, 0, code)
	require.Empty(t, completed(events(t, out)), "nothing runs twice")
}

func TestRunWorkdir(t *testing.T) {
	dir, work := t.TempDir(), t.TempDir()
	dot := filepath.Join(dir, "w.dot")
	require.NoError(t, os.WriteFile(dot, []byte(`digraph w { start [shape=Mdiamond]; mark [shape=parallelogram, tool_command="touch marked"]; exit [shape=Msquare]; start -> mark -> exit }`), 0o644))
	logs := t.TempDir()
	code, _, errOut := cli(t, "run", dot, "--workdir", work, "--logs", logs, "--data", t.TempDir())
	require.Equal(t, 0, code, errOut)
	_, err := os.Stat(filepath.Join(work, "marked"))
	require.NoError(t, err, "the tool ran in --workdir")
	_, err = os.Stat(filepath.Join(logs, "marked"))
	require.True(t, os.IsNotExist(err), "not in the run directory")
}

// TestVersion: --version names the version, the commit and the Go
// toolchain; -ldflags -X sets the first two.
func TestVersion(t *testing.T) {
	code, out, _ := cli(t, "--version")
	require.Equal(t, 0, code)
	require.Regexp(t, `^switchyard \S+ \(commit \S+, go1\.\S+ \w+/\w+\)\n$`, out)
	require.Contains(t, out, runtime.Version())

	defer func(v, c string) { version, commit = v, c }(version, commit)
	version, commit = "v1.2.3", "0123456789abcdef0123"
	code, out, _ = cli(t, "--version")
	require.Equal(t, 0, code)
	require.Regexp(t, `^switchyard v1\.2\.3 \(commit 0123456789ab(\+modified)?, `+regexp.QuoteMeta(runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH)+`\)\n$`, out)
}
