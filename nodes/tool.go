package nodes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Tool runs the node's tool_command with `sh -c` (spec 4.10). Exit status 0
// is success with tool.output = stdout; anything else fails. The command
// runs in its own process group, killed whole when the node's timeout or
// the session ends. Its stdout and stderr are saved as stdout.txt and
// stderr.txt in the stage directory. Hooks (spec 9.7) run the same way and
// read a JSON description of the call on stdin: tool_hooks.pre (node, else
// graph) runs first, and a non-zero exit skips the call (outcome skipped);
// tool_hooks.post runs after, with the exit code and output tails, its
// failure only noted.
type Tool struct{}

var _ Handler = Tool{}

// maxEnvValue caps an environment value (Linux refuses one over 128 KiB).
const maxEnvValue = 64 << 10

// maxOutput caps tool.output in the context.
const maxOutput = 64 << 10

// Handle runs the command.
func (Tool) Handle(ctx context.Context, in *Input) (*Outcome, error) {
	command := in.Node.Attrs.String("tool_command")
	if strings.TrimSpace(command) == "" {
		return &Outcome{Status: StatusFail, FailureReason: "tool node " + in.Node.ID + " has no tool_command"}, nil
	}
	dir := in.WorkDir
	if dir == "" {
		dir = in.LogsDir
	}
	env := append(os.Environ(),
		"SWITCHYARD_NODE="+in.Node.ID, "SWITCHYARD_SESSION="+in.SessionID,
		"SWITCHYARD_ATTEMPT_ID="+in.AttemptID, "SWITCHYARD_STAGE_DIR="+in.StageDir,
		"SWITCHYARD_LOGS_DIR="+in.LogsDir,
		// What fired the node: data in the environment, never in the
		// command line (hostile text is not interpolated by a shell).
		"SWITCHYARD_INPUT="+truncate(InputText(in.Messages), maxEnvValue),
		"SWITCHYARD_MESSAGES="+inputMessagesJSON(in.Messages, maxEnvValue))
	hook := func(name string) string {
		if v := in.Node.Attrs.String(name); v != "" {
			return v
		}
		return in.Graph.Attrs.String(name)
	}
	var notes []string
	call := hookCall{Node: in.Node.ID, Session: in.SessionID, AttemptID: in.AttemptID, Command: command,
		WorkDir: dir, StageDir: in.StageDir, Phase: "pre"}
	if pre := hook("tool_hooks.pre"); pre != "" {
		res := runShell(ctx, pre, dir, env, call.json())
		if res.err != nil || res.code != 0 {
			o := &Outcome{Status: StatusSkipped, Notes: fmt.Sprintf("tool_hooks.pre exited %d: the tool call was skipped", res.code),
				ContextUpdates: map[string]string{"tool.skipped": "true"}}
			if res.timedOut {
				o.Status, o.FailureReason = StatusFail, "timeout: tool_hooks.pre was killed"
			}
			_ = WriteStatusFile(in.StageDir, o)
			return o, nil
		}
	}
	res := runShell(ctx, command, dir, env, "")
	if in.StageDir != "" {
		_ = writeStage(in.StageDir, "stdout.txt", res.stdout)
		_ = writeStage(in.StageDir, "stderr.txt", res.stderr)
	}
	if post := hook("tool_hooks.post"); post != "" && !res.timedOut {
		call.Phase, call.ExitCode, call.Stdout, call.Stderr = "post", &res.code, tail(res.stdout, 4096), tail(res.stderr, 4096)
		if pr := runShell(ctx, post, dir, env, call.json()); pr.err != nil || pr.code != 0 {
			notes = append(notes, fmt.Sprintf("tool_hooks.post exited %d", pr.code))
		}
	}
	out := strings.TrimSpace(res.stdout)
	if len(out) > maxOutput {
		out = out[:maxOutput]
	}
	o := &Outcome{ContextUpdates: map[string]string{"tool.output": out, "tool.exit_code": fmt.Sprint(res.code)},
		Response: out, Notes: strings.Join(notes, "; ")}
	switch {
	case res.timedOut:
		o.Status = StatusFail
		o.FailureReason = "timeout: the command was killed after " + res.dur.Round(time.Millisecond).String()
	case res.err != nil:
		o.Status = StatusFail
		o.FailureReason = res.err.Error()
	case res.code != 0:
		o.Status = StatusFail
		o.FailureReason = fmt.Sprintf("exit status %d: %s", res.code, tail(res.stderr, 500))
	default:
		o.Status = StatusSuccess
	}
	_ = WriteStatusFile(in.StageDir, o)
	return o, nil
}

// hookCall is the JSON a tool hook reads on stdin (spec 9.7).
type hookCall struct {
	Phase     string `json:"phase"` // pre or post
	Node      string `json:"node"`
	Session   string `json:"session"`
	AttemptID string `json:"attempt_id"`
	Command   string `json:"command"`
	WorkDir   string `json:"work_dir"`
	StageDir  string `json:"stage_dir"`
	ExitCode  *int   `json:"exit_code,omitempty"` // post only
	Stdout    string `json:"stdout,omitempty"`    // post only: its tail
	Stderr    string `json:"stderr,omitempty"`    // post only: its tail
}

func (c hookCall) json() string {
	b, _ := json.Marshal(c)
	return string(b) + "\n"
}

type shellResult struct {
	stdout, stderr string
	code           int
	err            error
	timedOut       bool
	dur            time.Duration
}

// runShell runs `sh -c command` in its own process group; when ctx ends the
// whole group is killed and waited for.
func runShell(ctx context.Context, command, dir string, env []string, stdin string) shellResult {
	if dir != "" {
		_ = os.MkdirAll(dir, 0o755)
		if abs, err := filepath.Abs(dir); err == nil {
			dir = abs
		}
	}
	cmd := exec.Command("sh", "-c", command)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 2 * time.Second // a background child holding stdout must not hang the node
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return shellResult{err: err, code: -1}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	timedOut := false
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		err = <-done
		timedOut = true
	}
	res := shellResult{stdout: stdout.String(), stderr: stderr.String(), timedOut: timedOut, dur: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		res.code = ee.ExitCode()
	default:
		res.err, res.code = err, -1
	}
	if timedOut {
		res.code = -1
	}
	return res
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
