package nodes_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/nodes"
)

func toolGraph(attrs string) string {
	return `digraph t { start [shape=Mdiamond]; run [shape=parallelogram` + attrs + `]; exit [shape=Msquare]; start -> run -> exit }`
}

func readStage(t *testing.T, in *nodes.Input, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(in.StageDir, name))
	require.NoError(t, err)
	return string(data)
}

func TestTool(t *testing.T) {
	tests := []struct {
		name   string
		attrs  string
		status nodes.Status
		check  func(t *testing.T, in *nodes.Input, o *nodes.Outcome)
	}{
		{"stdout is the output", `, tool_command="echo out; echo err >&2"`, nodes.StatusSuccess, func(t *testing.T, in *nodes.Input, o *nodes.Outcome) {
			require.Equal(t, "out", o.ContextUpdates["tool.output"])
			require.Equal(t, "0", o.ContextUpdates["tool.exit_code"])
			require.Equal(t, "out\n", readStage(t, in, "stdout.txt"))
			require.Equal(t, "err\n", readStage(t, in, "stderr.txt"))
			sf, ok, err := nodes.ReadStatusFile(in.StageDir)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, "success", sf.Outcome)
		}},
		{"environment", `, tool_command="echo $SWITCHYARD_NODE $SWITCHYARD_SESSION $SWITCHYARD_ATTEMPT_ID $SWITCHYARD_STAGE_DIR"`, nodes.StatusSuccess,
			func(t *testing.T, in *nodes.Input, o *nodes.Outcome) {
				require.Equal(t, "run s1 s1/run/1/1 "+in.StageDir, o.ContextUpdates["tool.output"])
			}},
		{"runs in the work directory", `, tool_command="pwd"`, nodes.StatusSuccess, func(t *testing.T, in *nodes.Input, o *nodes.Outcome) {
			want, err := filepath.EvalSymlinks(in.WorkDir)
			require.NoError(t, err)
			require.Equal(t, want, o.ContextUpdates["tool.output"])
		}},
		{"non-zero exit fails with the stderr tail", `, tool_command="echo nope >&2; exit 7"`, nodes.StatusFail, func(t *testing.T, in *nodes.Input, o *nodes.Outcome) {
			require.Contains(t, o.FailureReason, "exit status 7")
			require.Contains(t, o.FailureReason, "nope")
			require.Equal(t, "7", o.ContextUpdates["tool.exit_code"])
		}},
		{"long output is capped", `, tool_command="head -c 200000 /dev/zero | tr '\\0' x"`, nodes.StatusSuccess, func(t *testing.T, in *nodes.Input, o *nodes.Outcome) {
			require.Len(t, o.ContextUpdates["tool.output"], 64<<10)
			require.Len(t, readStage(t, in, "stdout.txt"), 200000, "the stage file keeps everything")
		}},
		{"missing tool_command", ``, nodes.StatusFail, func(t *testing.T, in *nodes.Input, o *nodes.Outcome) {
			require.Contains(t, o.FailureReason, "no tool_command")
		}},
		{"failing pre-hook skips the call", `, tool_command="echo ran > ran.txt", tool_hooks.pre="exit 1"`, nodes.StatusSkipped, func(t *testing.T, in *nodes.Input, o *nodes.Outcome) {
			_, err := os.Stat(filepath.Join(in.WorkDir, "ran.txt"))
			require.ErrorIs(t, err, os.ErrNotExist)
			require.Contains(t, o.Notes, "tool_hooks.pre exited 1")
		}},
		{"pre-hook reads the call as JSON", `, tool_command="echo ran", tool_hooks.pre="cat > pre.json"`, nodes.StatusSuccess, func(t *testing.T, in *nodes.Input, o *nodes.Outcome) {
			var call map[string]any
			data, err := os.ReadFile(filepath.Join(in.WorkDir, "pre.json"))
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(data, &call))
			require.Equal(t, "pre", call["phase"])
			require.Equal(t, "run", call["node"])
			require.Equal(t, "echo ran", call["command"])
		}},
		{"post-hook sees the exit code; its failure is only noted", `, tool_command="echo out; exit 3", tool_hooks.post="cat > post.json; exit 9"`, nodes.StatusFail,
			func(t *testing.T, in *nodes.Input, o *nodes.Outcome) {
				var call map[string]any
				data, err := os.ReadFile(filepath.Join(in.WorkDir, "post.json"))
				require.NoError(t, err)
				require.NoError(t, json.Unmarshal(data, &call))
				require.Equal(t, "post", call["phase"])
				require.EqualValues(t, 3, call["exit_code"])
				require.Equal(t, "out", call["stdout"], "its tail")
				require.Contains(t, o.Notes, "tool_hooks.post exited 9")
				require.Contains(t, o.FailureReason, "exit status 3")
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := load(t, toolGraph(tc.attrs))
			in := input(t, g, "run")
			o := handle(t, registry(t, nodes.Deps{}), in)
			require.Equal(t, tc.status, o.Status, o.FailureReason)
			tc.check(t, in, o)
		})
	}
}

func TestToolGraphHooks(t *testing.T) {
	g := load(t, `digraph t { tool_hooks.pre="exit 2"; start [shape=Mdiamond]; run [shape=parallelogram, tool_command="true"]; free [shape=parallelogram, tool_command="true", tool_hooks.pre="true"]; exit [shape=Msquare]; start -> run -> free -> exit }`)
	r := registry(t, nodes.Deps{})
	require.Equal(t, nodes.StatusSkipped, handle(t, r, input(t, g, "run")).Status, "the graph's hook applies")
	require.Equal(t, nodes.StatusSuccess, handle(t, r, input(t, g, "free")).Status, "the node's hook wins")
}

func TestToolWorkDirDefaultsToLogsDir(t *testing.T) {
	g := load(t, toolGraph(`, tool_command="pwd"`))
	in := input(t, g, "run")
	in.WorkDir = ""
	o := handle(t, registry(t, nodes.Deps{}), in)
	want, err := filepath.EvalSymlinks(in.LogsDir)
	require.NoError(t, err)
	require.Equal(t, want, o.ContextUpdates["tool.output"])
}

// TestToolTimeoutKillsProcessGroup runs a command that starts a child and
// hangs; the context's deadline must kill the whole process group.
func TestToolTimeoutKillsProcessGroup(t *testing.T) {
	g := load(t, toolGraph(`, tool_command="sleep 30 & echo $! > child.pid; echo $$ > sh.pid; wait"`))
	in := input(t, g, "run")
	h, _ := registry(t, nodes.Deps{}).Lookup("tool")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan *nodes.Outcome, 1)
	go func() {
		o, _ := h.Handle(ctx, in)
		done <- o
	}()
	child := waitForPid(t, filepath.Join(in.WorkDir, "child.pid"))
	shell := waitForPid(t, filepath.Join(in.WorkDir, "sh.pid"))
	pgid, err := syscall.Getpgid(shell)
	require.NoError(t, err)
	require.Equal(t, shell, pgid, "the command leads its own process group")
	cancel()
	o := receive(t, done)
	require.Equal(t, nodes.StatusFail, o.Status)
	require.Contains(t, o.FailureReason, "timeout")
	waitGone(t, child) // the grandchild was killed with its group
	waitGone(t, shell)
}

func TestToolNodeDeadline(t *testing.T) {
	g := load(t, toolGraph(`, tool_command="sleep 30"`))
	in := input(t, g, "run")
	h, _ := registry(t, nodes.Deps{}).Lookup("tool")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	o, err := h.Handle(ctx, in)
	require.NoError(t, err)
	require.Equal(t, nodes.StatusFail, o.Status)
	require.Contains(t, o.FailureReason, "timeout")
	require.Less(t, time.Since(start), 10*time.Second)
}

// waitForPid waits, up to 10 seconds, for a command to write its pid file.
func waitForPid(t *testing.T, path string) int {
	t.Helper()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if data, err := os.ReadFile(path); err == nil && strings.HasSuffix(string(data), "\n") {
			pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
			require.NoError(t, err)
			return pid
		}
		select {
		case <-tick.C: // polls a file another process writes, under a deadline
		case <-deadline:
			t.Fatalf("%s was never written", path)
		}
	}
}

// waitGone waits, up to 10 seconds, until pid no longer runs (a zombie
// waiting for init to reap it counts as gone).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil || strings.Contains(string(st), ") Z ") {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("process %d still runs", pid)
		}
	}
}

// TestToolGetsItsInput: the envelopes that fired a tool node are in its
// environment (data, never part of the command line).
func TestToolGetsItsInput(t *testing.T) {
	g := load(t, toolGraph(`, tool_command="printf '%s|' \"$SWITCHYARD_INPUT\"; printf '%s' \"$SWITCHYARD_MESSAGES\""`))
	in := input(t, g, "run")
	in.Messages = []nodes.Message{{ID: "e1", Kind: "handoff", Text: "$(rm -rf /) `x`"}, {ID: "e2", Kind: "handoff", From: "a", Text: "two"}}
	o := handle(t, registry(t, nodes.Deps{}), in)
	require.Equal(t, nodes.StatusSuccess, o.Status, o.FailureReason)
	text, list, _ := strings.Cut(o.ContextUpdates["tool.output"], "|")
	require.Equal(t, "$(rm -rf /) `x`\n\ntwo", text)
	var msgs []map[string]any
	require.NoError(t, json.Unmarshal([]byte(list), &msgs))
	require.Len(t, msgs, 2)
	require.Equal(t, "a", msgs[1]["from"])
}
