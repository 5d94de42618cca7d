package agent_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/nodes/agent"
	"github.com/switchyard/switchyard/nodes/agent/internal/fakeagent"
)

// fake is one test's view of a fake agent: where it records its
// invocation, its pids, and the gate it waits on.
type fake struct {
	name     string
	dir      string
	argsFile string
	pidFile  string
	gate     string
}

func newFake(t *testing.T, name string) *fake {
	t.Helper()
	dir := t.TempDir()
	return &fake{name: name, dir: dir, argsFile: filepath.Join(dir, "args.json"),
		pidFile: filepath.Join(dir, "pids"), gate: filepath.Join(dir, "gate")}
}

// opts points a provider at the fake; with gated the fake waits after its
// first output until the gate opens.
func (f *fake) opts(gated bool) agent.CLIOptions {
	env := []string{"FAKE_ARGS_FILE=" + f.argsFile, "FAKE_PID_FILE=" + f.pidFile}
	if gated {
		env = append(env, "FAKE_GATE="+f.gate)
	}
	return agent.CLIOptions{Bin: fakeBins[f.name], Env: env, Grace: 200 * time.Millisecond}
}

func (f *fake) provider(opts agent.CLIOptions) agent.Provider {
	switch f.name {
	case "claude":
		return agent.NewClaude(opts)
	case "codex":
		return agent.NewCodex(opts)
	case "gemini":
		return agent.NewGemini(opts)
	}
	panic("unknown fake " + f.name)
}

// invocation is what the fake recorded about how it was started.
func (f *fake) invocation(t *testing.T) fakeagent.Invocation {
	t.Helper()
	b, err := os.ReadFile(f.argsFile)
	require.NoError(t, err)
	var inv fakeagent.Invocation
	require.NoError(t, json.Unmarshal(b, &inv))
	return inv
}

// pids reads the pids the hang scenario recorded.
func (f *fake) pids(t *testing.T) []int {
	t.Helper()
	b, err := os.ReadFile(f.pidFile)
	require.NoError(t, err, "the fake did not record its pids")
	var pids []int
	for _, s := range strings.Fields(string(b)) {
		n, err := strconv.Atoi(s)
		require.NoError(t, err)
		pids = append(pids, n)
	}
	require.Len(t, pids, 2)
	return pids
}

// requireGone waits until every pid is gone (or a zombie nobody reaps in
// this container) and its process group is empty.
func requireGone(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for !dead(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d is still running", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// The group leader is pids[0]; nothing in its group may run.
	for {
		err := syscall.Kill(-pids[0], 0)
		if err == syscall.ESRCH || allZombies(pids) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process group %d still has members (kill: %v)", pids[0], err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func dead(pid int) bool {
	if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// pid (comm) STATE ...: a zombie has exited.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

func allZombies(pids []int) bool {
	for _, p := range pids {
		if !dead(p) {
			return false
		}
	}
	return true
}

// recorder collects a run's events (called on the Run goroutine only).
type recorder struct {
	events []agent.Event
	onText func(string)
}

func (r *recorder) on(ev agent.Event) {
	r.events = append(r.events, ev)
	if ev.Kind == "text" && r.onText != nil {
		r.onText(ev.Text)
	}
}

func (r *recorder) text() string {
	var b strings.Builder
	for _, ev := range r.events {
		if ev.Kind == "text" {
			b.WriteString(ev.Text)
		}
	}
	return b.String()
}

func (r *recorder) tools() []string {
	var out []string
	for _, ev := range r.events {
		if ev.Kind == "tool_call" {
			out = append(out, ev.Tool)
		}
	}
	return out
}

func (r *recorder) usage() agent.Usage {
	var u agent.Usage
	for _, ev := range r.events {
		if ev.Kind == "usage" {
			u = u.Add(ev.Usage)
		}
	}
	return u
}
