package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/internal/brokertest"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

// workerProc is a `switchyard worker` subprocess and the lines of its log.
type workerProc struct {
	cmd   *exec.Cmd
	lines chan string
	mu    sync.Mutex
	log   strings.Builder
	done  chan struct{}
}

// startWorker starts `switchyard worker` against b's listener.
func startWorker(t testing.TB, b *broker.Broker, admin string, args ...string) *workerProc {
	t.Helper()
	return runWorkerProc(t, exec.Command(switchyardBinary(t), append([]string{"worker", "--nats", b.ClientURL(), "--token", admin}, args...)...))
}

// runWorkerProc starts cmd, a `switchyard worker`, and reads its log.
func runWorkerProc(t testing.TB, cmd *exec.Cmd) *workerProc {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	w := &workerProc{cmd: cmd, lines: make(chan string, 1000), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			w.mu.Lock()
			w.log.WriteString(sc.Text() + "\n")
			w.mu.Unlock()
			select {
			case w.lines <- sc.Text():
			default:
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-w.done
		_ = cmd.Wait()
	})
	return w
}

// waitLine waits for a log line containing all of want and returns it.
func (w *workerProc) waitLine(t *testing.T, d time.Duration, want ...string) string {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case l := <-w.lines:
			ok := true
			for _, s := range want {
				ok = ok && strings.Contains(l, s)
			}
			if ok {
				return l
			}
		case <-w.done:
			t.Fatalf("worker exited before logging %q:\n%s", want, w.String())
		case <-timeout:
			t.Fatalf("worker did not log %q within %s:\n%s", want, d, w.String())
		}
	}
}

func (w *workerProc) String() string { w.mu.Lock(); defer w.mu.Unlock(); return w.log.String() }

// kill ends the worker with SIGKILL.
func (w *workerProc) kill() {
	_ = w.cmd.Process.Kill()
	<-w.done
	_ = w.cmd.Wait()
}

// jobOf is the job id of a worker's "job started" log line.
func jobOf(line string) string {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, "job="); ok {
			return v
		}
	}
	return ""
}

// startPoolSession runs src in process on b and returns the session and
// the node.completed events of node.
func startPoolSession(t testing.TB, b *broker.Broker, src string) (*session.Session, chan *pb.Event) {
	t.Helper()
	g, diags := graph.Load("pool.dot", []byte(src), graph.WithKnownTypes(builtinTypes()...))
	require.False(t, diags.HasErrors(), "%v", diags)
	require.Empty(t, diags, "a pool or remote node is no warning")
	evs := make(chan *pb.Event, 10000)
	cfg := session.Config{ID: session.NewID(), Graph: g, Broker: b, LogsDir: t.TempDir(),
		Observer: func(ev *pb.Event) {
			if ev.GetKind() == "node.completed" {
				evs <- ev
			}
		}}
	s, err := session.Start(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	return s, evs
}

// A worker killed with SIGKILL mid-job: the job goes to another worker
// after the ack wait, with the same attempt id, and the owner commits the
// firing once.
func TestWorkerKilledMidJobRedelivered(t *testing.T) {
	b := brokertest.Start(t, brokertest.Listen("outside", "admin"))
	dir := t.TempDir()
	// The first run of the job blocks (until the test ends) after saying
	// it started, with its pid; a run that sees it started finishes at
	// once. The first run's worker is killed under it: the test ends it
	// (a release file alone raced the removal of its directory, and the
	// shell outlived the test, polling for it).
	t.Cleanup(func() {
		_ = os.WriteFile(filepath.Join(dir, "release"), nil, 0o644)
		if data, err := os.ReadFile(filepath.Join(dir, "first")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && pid > 1 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	tool := `echo "$SWITCHYARD_ATTEMPT_ID" >> starts.txt; if [ -f first ]; then echo done; else echo $$ > first; while [ ! -f release ]; do sleep 0.05; done; echo first; fi`
	src := `digraph W { start [shape=Mdiamond]; work [shape=parallelogram, pool=cpu, tool_command=` + quote(tool) + `]; exit [shape=Msquare]; start -> work -> exit }`
	a := startWorker(t, b, "admin", "--pool", "cpu", "--ack-wait", "1s", "--workdir", dir)
	s, evs := startPoolSession(t, b, src)
	started := a.waitLine(t, 30*time.Second, "job started", "node=work")
	// Wait for the handler itself to be under way in worker A.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, "first")); err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "the job's command never started")
		time.Sleep(20 * time.Millisecond)
	}
	a.kill()
	bw := startWorker(t, b, "admin", "--pool", "cpu", "--ack-wait", "1s", "--workdir", dir)
	again := bw.waitLine(t, 30*time.Second, "job started", "node=work")
	require.Equal(t, jobOf(started), jobOf(again), "the redelivered job keeps its attempt id")
	bw.waitLine(t, 30*time.Second, "job done", "status=success")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := s.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status, rep.Reason)
	n := rep.Node("work")
	require.NotNil(t, n)
	require.Equal(t, 1, n.Visits)
	require.Equal(t, 1, n.Attempts)
	require.Contains(t, n.Output, "done")
	var works int
	for len(evs) > 0 {
		if ev := <-evs; ev.GetNode() == "work" {
			works++
		}
	}
	require.Equal(t, 1, works, "the firing is committed once")
	data, err := os.ReadFile(filepath.Join(dir, "starts.txt"))
	require.NoError(t, err)
	runs := strings.Fields(string(data))
	require.Len(t, runs, 2)
	require.Equal(t, runs[0], runs[1], "both runs had the same attempt id")
	require.Equal(t, jobOf(started), runs[0])
}

func quote(s string) string {
	return `"` + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), `"`, `\"`) + `"`
}

// python3 is the interpreter the Python worker test runs; without it the
// test skips, unless CI=true (.ci/run installs it).
func python3(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3 is missing (.ci/run installs it: apt-get install -y python3)")
		}
		t.Skip("python3 is not installed: the Python worker is not run")
	}
	return p
}

// Nodes in other languages: a type=remote node served by the stdlib Python
// worker of examples/workers (pulling from the work queue, the NATS text
// protocol over a socket) and one served by the `nats reply` one-liner of
// docs/workers.md (work_mode=request), in one session on a real server.
func TestOutsideWorkers(t *testing.T) {
	py := python3(t)
	b := brokertest.Start(t, brokertest.Listen("outside", "admin"))
	url := b.ClientURL()

	pyw := exec.Command(py, "../../examples/workers/raw_worker.py", "--nats", url, "--token", "admin", "--pool", "py")
	pyw.Env = append(os.Environ(), "PYTHONUNBUFFERED=1")
	var pyOut syncBuffer
	pyw.Stdout, pyw.Stderr = &pyOut, &pyOut
	pyw.WaitDelay = 5 * time.Second
	require.NoError(t, pyw.Start())
	pyDone := make(chan error, 1)
	go func() { pyDone <- pyw.Wait() }()
	t.Cleanup(func() {
		_ = pyw.Process.Signal(syscall.SIGTERM)
		select {
		case <-pyDone:
		case <-time.After(30 * time.Second):
			_ = pyw.Process.Kill()
			<-pyDone
		}
	})

	// The one-liner of docs/workers.md, answering one job.
	reply := exec.Command("go", "tool", "-modfile=../../tools/go.mod", "nats", "--server", url, "--token", "admin",
		"reply", "syr.greeter.>", `{"kind":"outcome","outcome":{"status":"success"},"payload":{"message":"hello from nats reply"}}`, "--count", "1")
	var replyOut syncBuffer
	reply.Stdout, reply.Stderr = &replyOut, &replyOut
	reply.WaitDelay = 5 * time.Second // go tool's child may outlive a kill
	require.NoError(t, reply.Start())
	replyDone := make(chan struct{})
	go func() { _ = reply.Wait(); close(replyDone) }()
	t.Cleanup(func() {
		select {
		case <-replyDone:
		default:
			_ = reply.Process.Kill()
			<-replyDone
		}
	})
	// The responder is there when the server sees its subscription.
	deadline := time.Now().Add(60 * time.Second)
	for !b.Interest("syr.greeter.s.greet") {
		require.True(t, time.Now().Before(deadline), "nats reply never subscribed: %s", replyOut.String())
		time.Sleep(50 * time.Millisecond)
	}

	src := `digraph R {
		start [shape=Mdiamond]
		shout [type=remote, pool=py, prompt="hello from switchyard"]
		greet [type=remote, pool=greeter, work_mode=request]
		exit [shape=Msquare]
		start -> shout -> greet -> exit
	}`
	s, _ := startPoolSession(t, b, src)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := s.Wait(ctx)
	require.NoError(t, err, "python worker: %s\nnats reply: %s", pyOut.String(), replyOut.String())
	require.Equal(t, "success", rep.Status, "%s\npython worker: %s\nnats reply: %s", rep.Reason, pyOut.String(), replyOut.String())
	require.Equal(t, "HELLO FROM SWITCHYARD", rep.Node("shout").Output)
	require.Equal(t, "hello from nats reply", rep.Node("greet").Output)
	require.Contains(t, pyOut.String(), "job done")
	// --count 1: it answered one job and left (its exit status is 1 after
	// the drain that ends it; what it received is what matters).
	select {
	case <-replyDone:
		require.Contains(t, replyOut.String(), `"kind":"job"`)
	case <-time.After(30 * time.Second):
		t.Fatalf("nats reply did not exit after its one reply: %s", replyOut.String())
	}
}

// The owner's scheduler still decides: with max_in_flight=1, four parallel
// pool firings never run at once, though three workers are free.
func TestWorkerPoolKeepsMaxInFlight(t *testing.T) {
	b := brokertest.Start(t, brokertest.Listen("outside", "admin"))
	dir := t.TempDir()
	// mkdir is atomic: a second job running at once fails to take the lock.
	tool := `mkdir busy || exit 7; i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; rmdir busy; echo ok`
	var src strings.Builder
	src.WriteString("digraph M { graph [max_in_flight=1]; start [shape=Mdiamond]; fan [shape=component, max_parallel=4]; merge [shape=tripleoctagon]; exit [shape=Msquare]\n")
	for _, n := range []string{"a", "b", "c", "d"} {
		src.WriteString(n + " [shape=parallelogram, pool=cpu, tool_command=" + quote(tool) + "]; fan -> " + n + " -> merge\n")
	}
	src.WriteString("start -> fan; merge -> exit }")
	for i := 0; i < 3; i++ {
		startWorker(t, b, "admin", "--pool", "cpu", "--workdir", dir)
	}
	s, _ := startPoolSession(t, b, src.String())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := s.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status, rep.Reason)
	for _, n := range []string{"a", "b", "c", "d"} {
		require.Equal(t, "success", rep.Node(n).Status, n)
	}
}

// A worker with the worker credential (serve --worker-token) serves a
// pool's jobs; the same credential is refused a session's control
// subjects (switchyard stop).
func TestWorkerToken(t *testing.T) {
	b := brokertest.Start(t, brokertest.Listen("outside", "admin"),
		brokertest.Configure(func(c *broker.Config) { c.WorkerToken = "worker" }))
	src := `digraph W { start [shape=Mdiamond]; work [shape=parallelogram, pool=cpu, tool_command="echo worked"]; exit [shape=Msquare]; start -> work -> exit }`
	s, _ := startPoolSession(t, b, src)
	w := startWorker(t, b, "worker", "--pool", "cpu")
	w.waitLine(t, 30*time.Second, "job done", "status=success")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := s.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status, rep.Reason)
	require.Contains(t, rep.Node("work").Output, "worked")

	out, err := exec.Command(switchyardBinary(t), "stop", s.ID(), "--nats", b.ClientURL(), "--token", "worker").CombinedOutput()
	require.Error(t, err, "%s", out)
	require.Contains(t, string(out), "permission denied")
}
