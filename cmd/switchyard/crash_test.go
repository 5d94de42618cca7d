package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/internal/crash"
	"github.com/switchyard/switchyard/session"
)

// The crash tests run switchyard as a child process, kill it with SIGKILL
// at a named point of the runtime (internal/crash), resume it with a new
// process and compare what the session did with an uninterrupted run.

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// switchyardBinary builds the CLI once per test binary.
func switchyardBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "switchyard-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "switchyard")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = errors.New(string(out))
		}
	})
	require.NoError(t, binErr)
	return binPath
}

// outcome is what a durable session did, read from its store.
type outcome struct {
	firings  []string       // node:firing:status of every committed firing, sorted
	consumed map[string]int // envelope id -> how many records consumed it
	produced map[string]int
	effects  map[string]int // side-effect line -> how many times it was written
	cp       *session.Checkpoint
}

func readOutcome(t *testing.T, dir, id string) *outcome {
	t.Helper()
	b := brokertest.Start(t, brokertest.Configure(func(c *broker.Config) { c.DataDir = filepath.Join(dir, "data") }))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hist, err := session.History(ctx, b, id)
	require.NoError(t, err)
	o := &outcome{consumed: map[string]int{}, produced: map[string]int{}, effects: map[string]int{}}
	for _, h := range hist {
		if h.Status != "" {
			o.firings = append(o.firings, h.Node+":"+strconv.FormatUint(h.Firing, 10)+":"+h.Status)
		}
		for _, c := range h.ConsumedIDs {
			o.consumed[c]++
		}
		for _, p := range h.ProducedIDs {
			o.produced[p]++
		}
	}
	sort.Strings(o.firings)
	o.cp, err = session.LoadCheckpoint(ctx, b, id, 0)
	require.NoError(t, err)
	require.NoError(t, b.Close())
	if data, err := os.ReadFile(filepath.Join(dir, "effects")); err == nil {
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			o.effects[line]++
		}
	}
	return o
}

// child runs the CLI with args in dir, the crash point armed when point is
// not empty.
func child(t *testing.T, dir, point string, args ...string) (*exec.Cmd, []byte, error) {
	t.Helper()
	cmd := exec.Command(switchyardBinary(t), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "EFFECTS="+filepath.Join(dir, "effects"))
	if point != "" {
		cmd.Env = append(cmd.Env, crash.Env+"="+point)
	}
	out, err := cmd.Output()
	return cmd, out, err
}

// killed reports whether err is the exit of a process killed by SIGKILL.
func killed(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// lastEvent is the last JSON event a --json run printed.
func lastEvent(t *testing.T, out []byte) map[string]any {
	t.Helper()
	var last map[string]any
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev map[string]any
		if json.Unmarshal(sc.Bytes(), &ev) == nil {
			last = ev
		}
	}
	return last
}

// TestCrashPipeline kills a pipeline at 24 points of the runtime (between
// a commit and its publications, between publications, between publish
// and acknowledgement, in handlers, while a join waits, in the journal)
// and resumes it: the committed firings, the envelopes consumed and
// produced, the iteration counts and the side effects equal those of an
// uninterrupted run; nothing is lost and nothing consumed twice.
func TestCrashPipeline(t *testing.T) {
	pipeline, err := filepath.Abs("testdata/crash.dot")
	require.NoError(t, err)
	run := func(dir, point string) ([]byte, error) {
		_, out, err := child(t, dir, point, "run", pipeline, "--data", "data", "--logs", "logs", "--id", "c1", "--json")
		return out, err
	}
	refDir := t.TempDir()
	out, err := run(refDir, "")
	require.NoError(t, err)
	require.Equal(t, "success", lastEvent(t, out)["status"])
	ref := readOutcome(t, refDir, "c1")
	require.Len(t, ref.firings, 11)

	points := []string{
		"deliver:1", "deliver:4", "deliver:9",
		"handler:2", "handler:5", "handler:8",
		"handler-done:3", "handler-done:6",
		"before-commit:2", "before-commit:7",
		"after-commit:1", "after-commit:4", "after-commit:9",
		"between-publish:1", "between-publish:2",
		"after-publish:5", "after-publish:10",
		"after-ack:3", "after-ack:8",
		"join-wait:1", "join-wait:2",
		"after-record:6", "after-record:12",
		"before-snapshot:1",
	}
	var survived, lost, doubled, reruns int
	for _, p := range points {
		t.Run(p, func(t *testing.T) {
			dir := t.TempDir()
			_, err := run(dir, p)
			require.True(t, killed(err), "the run was not killed at %s: %v", p, err)
			_, out, err := child(t, dir, "", "resume", "c1", "--data", "data", "--logs", "logs", "--json")
			require.NoError(t, err, "resume after %s", p)
			last := lastEvent(t, out)
			require.Equal(t, "session.completed", last["kind"])
			require.Equal(t, "success", last["status"])

			got := readOutcome(t, dir, "c1")
			for id := range ref.consumed {
				if got.consumed[id] == 0 {
					lost++
				}
			}
			for _, n := range got.consumed {
				if n > 1 {
					doubled++
				}
			}
			require.Equal(t, ref.firings, got.firings, "committed firings")
			require.Equal(t, ref.consumed, got.consumed, "envelopes consumed, once each")
			require.Equal(t, ref.produced, got.produced, "envelopes produced, once each")
			require.Equal(t, ref.cp.NodeVisits, got.cp.NodeVisits)
			require.Equal(t, ref.cp.Scheduler.Total, got.cp.Scheduler.Total, "iteration count")
			require.Equal(t, ref.cp.Scheduler.Iterations, got.cp.Scheduler.Iterations)
			require.Equal(t, "success", got.cp.Status)
			require.Empty(t, got.cp.Pending)
			// A handler cut short runs again with the same idempotency key:
			// the distinct side effects are the uninterrupted run's.
			require.Equal(t, keys(ref.effects), keys(got.effects))
			for _, n := range got.effects {
				reruns += n - 1
			}
			survived++
		})
	}
	t.Logf("pipeline: %d kills survived, %d envelopes lost, %d consumed twice, %d handler re-runs with a stable attempt id",
		survived, lost, doubled, reruns)
}

func keys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
