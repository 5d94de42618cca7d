package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/crash"
)

// inDir runs the CLI with args in dir, the side-effect file and the crash
// point (if any) in its environment.
func inDir(t *testing.T, dir, effects, point string, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(switchyardBinary(t), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "EFFECTS="+effects)
	if point != "" {
		cmd.Env = append(cmd.Env, crash.Env+"="+point)
	}
	return cmd.Output()
}

// TestResumeKeepsItsDirectories: a session killed half-way and resumed —
// from another current directory — works in the work directory and
// writes to the run directory it started with; a fork gets its own run
// directory <runs>/<new id> (with its manifest) and keeps the work
// directory.
func TestResumeKeepsItsDirectories(t *testing.T) {
	pipeline, err := filepath.Abs("testdata/dirs.dot")
	require.NoError(t, err)
	dir := t.TempDir()
	work, elsewhere := filepath.Join(dir, "work"), filepath.Join(dir, "elsewhere")
	require.NoError(t, os.Mkdir(work, 0o755))
	require.NoError(t, os.Mkdir(elsewhere, 0o755))
	effects := filepath.Join(dir, "effects")
	data := filepath.Join(dir, "data")

	_, err = inDir(t, dir, effects, "handler:3", "run", pipeline, "--data", data, "--id", "d1", "--workdir", "work", "--retain", "0")
	require.True(t, killed(err), "not killed: %v", err)
	out, err := inDir(t, elsewhere, effects, "", "resume", "d1", "--data", data, "--json")
	require.NoError(t, err)
	require.Equal(t, "success", lastEvent(t, out)["status"])

	runs := filepath.Join(dir, ".switchyard", "runs")
	wd := func() []string {
		data, err := os.ReadFile(effects)
		require.NoError(t, err)
		return strings.Split(strings.TrimSpace(string(data)), "\n")
	}
	for _, line := range wd() {
		require.Equal(t, work, line, "every tool works in the session's work directory")
	}
	require.FileExists(t, filepath.Join(runs, "d1", "manifest.json"))
	require.FileExists(t, filepath.Join(runs, "d1", "c", "status.json"), "the resumed run writes to its run directory")
	require.NoDirExists(t, filepath.Join(elsewhere, ".switchyard"), "nothing in a new run directory")

	// A fork from checkpoint 2: its own run directory, the same work one.
	require.NoError(t, os.Remove(effects))
	out, err = inDir(t, elsewhere, effects, "", "resume", "d1", "--from", "2", "--as", "d2", "--data", data, "--json")
	require.NoError(t, err)
	require.Equal(t, "success", lastEvent(t, out)["status"])
	for _, line := range wd() {
		require.Equal(t, work, line)
	}
	manifest, err := os.ReadFile(filepath.Join(runs, "d2", "manifest.json"))
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(manifest, &m))
	require.Equal(t, "d2", m["session_id"])
	require.FileExists(t, filepath.Join(runs, "d2", "c", "status.json"))
	require.NoDirExists(t, filepath.Join(elsewhere, ".switchyard"))
}

// interrupt runs args in dir — its tool hold interrupts it (SIGINT, as
// Ctrl-C) while it works — and returns the resume command it printed.
func interrupt(t *testing.T, dir string, args ...string) []string {
	t.Helper()
	cmd := exec.Command(switchyardBinary(t), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MARK="+filepath.Join(dir, "mark"))
	var stderr syncBuffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "stderr: %s", stderr.String())
	require.Equal(t, 1, ee.ExitCode(), "stderr: %s", stderr.String())
	_, hint, ok := strings.Cut(stderr.String(), "interrupted; resume with: ")
	require.True(t, ok, "no resume hint in: %s", stderr.String())
	hint = strings.TrimSpace(strings.SplitN(hint, "\n", 2)[0])
	words := strings.Fields(hint)
	require.Equal(t, "switchyard", words[0])
	return words
}

// TestInterruptHintIsTheWholeCommand: the command printed on an interrupt
// continues the run as it is printed — durable or not — with the flags
// the run needs; and a --durable=false run directory resumes without
// repeating --durable=false.
func TestInterruptHintIsTheWholeCommand(t *testing.T) {
	pipeline, err := filepath.Abs("testdata/interrupt.dot")
	require.NoError(t, err)
	for _, durable := range []bool{true, false} {
		t.Run(map[bool]string{true: "durable", false: "durable=false"}[durable], func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "m.json"), []byte(`{"note": [{"status": "success", "response": "noted"}]}`), 0o644))
			args := []string{"run", pipeline, "--data", "data", "--mock", "m.json", "--id", "h1", "--json"}
			if !durable {
				args = append(args, "--durable=false", "--logs", "logs")
			}
			words := interrupt(t, dir, args...)
			if durable {
				require.Equal(t, []string{"switchyard", "resume", "h1", "--data", "data", "--mock", "m.json", "--json"}, words)
			} else {
				require.Equal(t, []string{"switchyard", "run", pipeline, "--resume", "logs", "--durable=false", "--id", "h1",
					"--data", "data", "--mock", "m.json", "--json"}, words)
				// The same without --durable=false.
				words = append(words[:5:5], words[6:]...)
			}
			cmd := exec.Command(switchyardBinary(t), words[1:]...)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "MARK="+filepath.Join(dir, "mark"))
			out, err := cmd.Output()
			require.NoError(t, err, "%v", words)
			require.Equal(t, "success", lastEvent(t, out)["status"])
		})
	}
}
