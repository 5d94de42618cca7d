package proc

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// DefaultGrace is how long a process group has between SIGTERM and SIGKILL.
const DefaultGrace = 2 * time.Second

// forcedClose is how long Run waits for stdout to close after SIGKILL
// before it closes its end (a descendant that left the group may hold it).
const forcedClose = 2 * time.Second

// Spec describes one child process.
type Spec struct {
	Path  string   // executable (already resolved)
	Args  []string // arguments, without argv[0]
	Dir   string   // working directory ("" = the caller's)
	Env   []string // environment; nil = the parent's environment
	Stdin string   // written to the child's stdin, then closed
	// Grace is the time between SIGTERM and SIGKILL once ctx is done
	// (0 = DefaultGrace).
	Grace time.Duration
	// StderrTail is how many bytes of stderr are kept (0 = 8 KiB).
	StderrTail int
	// Started, when set, is called with the child's pid (= its process
	// group id) once it runs.
	Started func(pid int)
}

// Exit is how the child ended.
type Exit struct {
	Code     int    // exit status; -1 when killed by a signal
	Signal   string // the signal that ended it, "" when it exited
	Stderr   string // the tail of stderr
	Canceled bool   // ctx ended before the child did; the group was killed
}

// Run starts the child, calls onLine for every line of its stdout (without
// the newline, on the calling goroutine) and returns when the child has
// exited and its output is drained. The error is non-nil only when the
// child could not be started; ctx ending is reported in Exit.Canceled.
func Run(ctx context.Context, spec Spec, onLine func(line []byte)) (*Exit, error) {
	if err := ctx.Err(); err != nil {
		return &Exit{Code: -1, Canceled: true}, nil
	}
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Dir = spec.Dir
	cmd.Env = spec.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if spec.Stdin != "" {
		cmd.Stdin = strings.NewReader(spec.Stdin)
	}
	tail := &tailBuffer{max: spec.StderrTail}
	if tail.max <= 0 {
		tail.max = 8 << 10
	}
	cmd.Stderr = tail
	// Bounds Wait when a descendant outside the group keeps stderr or
	// stdin open.
	cmd.WaitDelay = forcedClose
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	pid := cmd.Process.Pid
	if spec.Started != nil {
		spec.Started(pid)
	}

	lines := make(chan []byte, 64)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		defer close(lines)
		readLines(stdout, lines)
	}()

	grace := spec.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	var (
		done     = ctx.Done()
		killT    *time.Timer
		killC    <-chan time.Time
		closeT   *time.Timer
		closeC   <-chan time.Time
		canceled bool
	)
	stopTimers := func() {
		if killT != nil {
			killT.Stop()
		}
		if closeT != nil {
			closeT.Stop()
		}
	}
loop:
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				break loop
			}
			onLine(line)
		case <-done:
			done = nil
			canceled = true
			_ = syscall.Kill(-pid, syscall.SIGTERM)
			killT = time.NewTimer(grace)
			killC = killT.C
		case <-killC:
			killC = nil
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			closeT = time.NewTimer(forcedClose)
			closeC = closeT.C
		case <-closeC:
			closeC = nil
			_ = stdout.Close() // unblocks the reader; it then closes lines
		}
	}
	stopTimers()
	<-readerDone
	werr := cmd.Wait()
	if canceled {
		// Whatever the group left behind goes too.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	ex := &Exit{Stderr: tail.String(), Canceled: canceled}
	ex.Code = cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		ex.Signal = ws.Signal().String()
	}
	var ee *exec.ExitError
	if werr != nil && !errors.As(werr, &ee) && !errors.Is(werr, exec.ErrWaitDelay) {
		return ex, werr
	}
	return ex, nil
}

// readLines sends each line of r (without its newline; a last line without
// one too) until EOF or a read error.
func readLines(r io.Reader, out chan<- []byte) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			line = trimEOL(line)
			out <- line
		}
		if err != nil {
			return
		}
	}
}

func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}

// Environ returns the parent's environment without the named variables,
// followed by extra (which wins over inherited values).
func Environ(drop []string, extra ...string) []string {
	skip := map[string]bool{}
	for _, d := range drop {
		skip[d] = true
	}
	for _, kv := range extra {
		k, _, _ := strings.Cut(kv, "=")
		skip[k] = true
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !skip[k] {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
