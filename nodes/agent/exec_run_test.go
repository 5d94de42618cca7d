package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/nodes/agent"
)

var cliNames = []string{"claude", "codex", "gemini"}

// A CLI that hangs is killed at the node timeout with its whole process
// group (the fake starts a child that ignores SIGTERM; hang_hard's parent
// ignores it too, so only SIGKILL ends them).
func TestCLIHangKilledAtDeadline(t *testing.T) {
	cases := []struct{ provider, scenario string }{
		{"claude", "hang"}, {"claude", "hang_hard"}, {"codex", "hang"}, {"gemini", "hang"},
	}
	for _, tc := range cases {
		t.Run(tc.provider+"/"+tc.scenario, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, tc.provider)
			p := f.provider(f.opts(false))
			const timeout = 1500 * time.Millisecond
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			start := time.Now()
			_, err := p.Run(ctx, &agent.Request{NodeID: "n1", Prompt: "fake:" + tc.scenario, WorkDir: f.dir}, nil)
			elapsed := time.Since(start)
			require.Error(t, err)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.Contains(t, err.Error(), "killed at the node timeout")
			require.False(t, errors.Is(err, agent.ErrRetryable))
			// Deadline + grace (200ms) + scheduling slack on a busy machine.
			require.GreaterOrEqual(t, elapsed, timeout-50*time.Millisecond)
			require.Less(t, elapsed, timeout+3*time.Second, "Run returned %s after the deadline", elapsed-timeout)
			requireGone(t, f.pids(t))
		})
	}
}

// Cancelling the context (the session stops) ends the run the same way.
func TestCLICancel(t *testing.T) {
	f := newFake(t, "codex")
	p := f.provider(f.opts(false))
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// cancel once the fake has started its child
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := os.Stat(f.pidFile); err == nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
	}()
	_, err := p.Run(ctx, &agent.Request{NodeID: "n1", Prompt: "fake:hang", WorkDir: f.dir}, nil)
	require.ErrorIs(t, err, context.Canceled)
	require.Contains(t, err.Error(), "cancelled")
	requireGone(t, f.pids(t))
}

// Partial output reaches onEvent while the CLI still runs: each fake
// stops after its first text until the test, having seen that text,
// opens the gate.
func TestCLIStreamsPartialOutput(t *testing.T) {
	for _, name := range cliNames {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, name)
			p := f.provider(f.opts(true))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var first string
			rec := &recorder{onText: func(s string) {
				if first == "" {
					first = s
					require.NoError(t, os.WriteFile(f.gate, nil, 0o644))
				}
			}}
			res, err := p.Run(ctx, &agent.Request{NodeID: "n1", Prompt: "fake:ok", WorkDir: f.dir}, rec.on)
			require.NoError(t, err)
			require.True(t, res.Success)
			require.Contains(t, first, "Hello")
			require.Contains(t, rec.text(), "world")
		})
	}
}

// The agent runs in the request's working directory, sees where its stage
// directory is (and can write status.json there), and does not inherit
// CLAUDECODE.
func TestCLIEnvironment(t *testing.T) {
	t.Setenv("CLAUDECODE", "1")
	t.Setenv("CLAUDE_CODE_ENTRYPOINT", "cli")
	// The SWITCHYARD_ variables checked are the runtime's, not the test
	// process's own (CI runs the tests with SWITCHYARD_FULL=1).
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "SWITCHYARD_") {
			t.Setenv(k, "") // restored after the test
			require.NoError(t, os.Unsetenv(k))
		}
	}
	for _, name := range cliNames {
		t.Run(name, func(t *testing.T) {
			f := newFake(t, name)
			work, stage := t.TempDir(), t.TempDir()
			opts := f.opts(false)
			opts.Env = append(opts.Env, "FAKE_EXTRA=yes")
			p := f.provider(opts)
			res, err := p.Run(context.Background(), &agent.Request{SessionID: "s1", NodeID: "plan", AttemptID: "a-1",
				Prompt: "fake:status", WorkDir: work, StageDir: stage}, nil)
			require.NoError(t, err)
			require.True(t, res.Success)
			inv := f.invocation(t)
			wantDir, _ := filepath.EvalSymlinks(work)
			gotDir, _ := filepath.EvalSymlinks(inv.Dir)
			require.Equal(t, wantDir, gotDir)
			require.Equal(t, map[string]string{"SWITCHYARD_SESSION": "s1", "SWITCHYARD_NODE": "plan",
				"SWITCHYARD_ATTEMPT": "a-1", "SWITCHYARD_STAGE_DIR": stage, "FAKE_EXTRA": "yes"}, inv.Env)
			b, err := os.ReadFile(filepath.Join(stage, "status.json"))
			require.NoError(t, err)
			var st map[string]any
			require.NoError(t, json.Unmarshal(b, &st))
			require.NotEmpty(t, st["outcome"])
		})
	}
}

// Full fidelity resumes the CLI's own session: the id goes to the CLI and
// the result carries the session id to resume next time.
func TestCLIResume(t *testing.T) {
	cases := []struct {
		provider, session string
		wantArgs          []string
	}{
		{"claude", "c0ffee00-0000-4000-8000-000000000002", []string{"--resume", "prev-1"}},
		{"codex", "prev-1", []string{"resume", "prev-1", "-"}},
		{"gemini", "prev-1", []string{"--resume", "prev-1"}},
	}
	for _, tc := range cases {
		t.Run(tc.provider, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, tc.provider)
			p := f.provider(f.opts(false))
			res, err := p.Run(context.Background(), &agent.Request{NodeID: "n1", Prompt: "again fake:ok",
				ResumeSession: "prev-1", Fidelity: "full", WorkDir: f.dir}, nil)
			require.NoError(t, err)
			require.Contains(t, res.Text, "resumed prev-1")
			require.Equal(t, tc.session, res.SessionID)
			require.True(t, containsSeq(f.invocation(t).Args, tc.wantArgs), "args %q lack %q", f.invocation(t).Args, tc.wantArgs)
		})
	}
}

// A missing executable is reported by Check (before a session starts) and
// by Run, with the variable that points at it.
func TestCLIMissingExecutable(t *testing.T) {
	for _, name := range cliNames {
		t.Run(name, func(t *testing.T) {
			f := newFake(t, name)
			opts := f.opts(false)
			opts.Bin = filepath.Join(t.TempDir(), "no-such-"+name)
			p := f.provider(opts)
			err := p.(agent.Checker).Check(context.Background())
			require.ErrorIs(t, err, agent.ErrNotInstalled)
			require.ErrorIs(t, err, agent.ErrTerminal)
			require.Contains(t, err.Error(), "SWITCHYARD_"+strings.ToUpper(name)+"_BIN")
			_, err = p.Run(context.Background(), &agent.Request{Prompt: "fake:ok"}, nil)
			require.ErrorIs(t, err, agent.ErrNotInstalled)

			// The environment variable names the executable.
			opts.Bin = ""
			t.Setenv("SWITCHYARD_"+strings.ToUpper(name)+"_BIN", fakeBins[name])
			require.NoError(t, f.provider(opts).(agent.Checker).Check(context.Background()))
			t.Setenv("SWITCHYARD_"+strings.ToUpper(name)+"_BIN", "no-such-agent-cli")
			require.ErrorIs(t, f.provider(opts).(agent.Checker).Check(context.Background()), agent.ErrNotInstalled)
		})
	}
}

// Providers are safe for concurrent use by several nodes.
func TestCLIConcurrentRuns(t *testing.T) {
	for _, name := range cliNames {
		t.Run(name, func(t *testing.T) {
			f := newFake(t, name)
			opts := f.opts(false)
			opts.Env = nil // no shared record file
			p := f.provider(opts)
			var wg sync.WaitGroup
			errs := make([]error, 4)
			texts := make([]string, 4)
			for i := range errs {
				wg.Go(func() {
					res, err := p.Run(context.Background(), &agent.Request{NodeID: "n", Prompt: "fake:ok", WorkDir: f.dir}, nil)
					errs[i] = err
					if res != nil {
						texts[i] = res.Text
					}
				})
			}
			wg.Wait()
			for i := range errs {
				require.NoError(t, errs[i])
				require.Contains(t, texts[i], "world")
			}
		})
	}
}

// A context already done starts nothing.
func TestCLIContextDoneBeforeRun(t *testing.T) {
	for _, name := range cliNames {
		t.Run(name, func(t *testing.T) {
			f := newFake(t, name)
			p := f.provider(f.opts(false))
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_, err := p.Run(ctx, &agent.Request{Prompt: "fake:ok", WorkDir: f.dir}, nil)
			require.ErrorIs(t, err, context.Canceled)
			_, statErr := os.Stat(f.argsFile)
			require.True(t, os.IsNotExist(statErr), "the CLI was started")
		})
	}
}

func containsSeq(s, seq []string) bool {
	for i := 0; i+len(seq) <= len(s); i++ {
		match := true
		for j := range seq {
			if s[i+j] != seq[j] {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}
