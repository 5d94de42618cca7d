package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/session"
)

// effectsGraph writes, in dir, the session graph name.dot: outside
// envelopes arrive on the queue edge src -> work; the tool work runs
// command (in its work directory).
func effectsGraph(t *testing.T, dir, name, command string) string {
	t.Helper()
	file := filepath.Join(dir, name+".dot")
	require.NoError(t, os.WriteFile(file, []byte(`digraph `+name+` {
    kind="session"
    stall_after=0
    src  [prompt="never fires: outside events arrive on its edge"]
    work [shape=parallelogram, tool_command=`+quote(command)+`]
    src -> work [delivery=queue]
}`), 0o644))
	return file
}

// startIn starts the CLI with args in the current directory cwd, its
// stderr in log; it is killed (and waited for) when the test ends, and
// done receives its exit.
func startIn(t *testing.T, cwd string, log *syncBuffer, args ...string) (*exec.Cmd, chan error) {
	t.Helper()
	cmd := exec.Command(switchyardBinary(t), args...)
	cmd.Dir, cmd.Stderr = cwd, log
	require.NoError(t, cmd.Start())
	done, exited := make(chan error, 1), make(chan struct{})
	go func() { done <- cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	return cmd, done
}

// exited waits, at most 30s, for a process started by startIn to end.
func exited(t *testing.T, done chan error, log *syncBuffer) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("the process did not end: %s", log.String())
	}
	return nil
}

// lines is the content of file, one entry per line (none when it does
// not exist).
func lines(t *testing.T, file string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

// listedBy waits until the serve processes on url list session id: a
// serve answers `sessions` once it listens, after it resumed what it
// resumes at start.
func listedBy(t *testing.T, url, id string, log *syncBuffer) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, out, _ := cli(t, "sessions", "--timeout", "300ms", "--nats", url, "--token", "adm")
		if code == 0 && strings.Contains(out, id) {
			return
		}
		require.True(t, time.Now().Before(deadline), "serve never listed session %s: %s", id, log.String())
	}
}

// TestServeResumesItsFilesOnly: the store holds a running session of
// b.dot whose serve process was killed, with an envelope acknowledged
// while nobody served it. serve a.dot leaves it as it is (not resumed,
// not leased, its tool does not run); serve --all resumes it, and its tool
// takes the envelope once.
func TestServeResumesItsFilesOnly(t *testing.T) {
	srv := brokertest.Start(t, brokertest.Listen("out", "adm"))
	url := srv.ClientURL()
	dir := t.TempDir()
	effects := filepath.Join(dir, "effects")
	a := effectsGraph(t, dir, "a", `echo "a $SWITCHYARD_INPUT" >> `+effects)
	b := effectsGraph(t, dir, "b", `echo "b $SWITCHYARD_INPUT" >> `+effects)
	start := adminProcesses(t, switchyardBinary(t), url, dir)
	watcher, err := nats.Connect(url, nats.Token("adm"))
	require.NoError(t, err)
	defer watcher.Close()
	pub := func(id, text string) {
		t.Helper()
		code, _, errOut := cli(t, "pub", id, "work", text, "--edge", "src:work", "--nats", url, "--token", "out")
		require.Equal(t, 0, code, errOut)
	}

	var logsB, wlogB syncBuffer
	eventsB := watchEvents(t, watcher, "sy.b1.evt.>", &wlogB)
	ownerB, ownerBDone := start(&logsB, "serve", b, "--id", "b1")
	eventsB.wait("session.started", "")
	pub("b1", "m0")
	eventsB.wait("node.completed", "work")
	require.NoError(t, ownerB.Process.Signal(syscall.SIGKILL))
	require.True(t, killed(<-ownerBDone), logsB.String())
	pub("b1", "m1") // acknowledged by b1's stream: nobody serves it

	// serve a.dot: a's session only.
	var logsA, wlogA syncBuffer
	resumedB := watchEvents(t, watcher, "sy.b1.evt.>", &wlogB) // a resumed session numbers its events anew
	eventsA := watchEvents(t, watcher, "sy.a1.evt.>", &wlogA)
	_, ownerADone := start(&logsA, "serve", a, "--id", "a1")
	listedBy(t, url, "a1", &logsA) // it listens once it resumed what it resumes
	pub("a1", "x0")
	eventsA.wait("node.completed", "work")
	require.NotContains(t, logsA.String(), "resumed session b1", "serve a.dot resumed b.dot's session")
	require.Equal(t, 0, resumedB.count("session.resumed", ""))
	require.Equal(t, []string{"b m0", "a x0"}, lines(t, effects), "b's tool ran again")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	owner, err := session.ReadOwner(ctx, srv, "b1", time.Now())
	require.NoError(t, err)
	require.Nil(t, owner, "nobody holds b1's lease")
	stored, err := session.List(ctx, srv)
	require.NoError(t, err)
	status := map[string]string{}
	for _, s := range stored {
		status[s.ID] = s.Status
	}
	require.Equal(t, map[string]string{"a1": "running", "b1": "running"}, status)
	code, _, errOut := cli(t, "stop", "a1", "--nats", url, "--token", "adm")
	require.Equal(t, 0, code, errOut)
	require.NoError(t, exited(t, ownerADone, &logsA), logsA.String())

	// serve --all: every running session of the store.
	var logsAll syncBuffer
	all, allDone := start(&logsAll, "serve", "--all")
	resumedB.wait("session.resumed", "")
	resumedB.wait("node.completed", "work")
	waitLog(t, &logsAll, "resumed session b1 (b)", 20*time.Second)
	require.NotContains(t, logsAll.String(), "resumed session a1", "a1 was stopped")
	require.Equal(t, []string{"b m0", "a x0", "b m1"}, lines(t, effects))
	require.NoError(t, all.Process.Signal(syscall.SIGTERM))
	require.NoError(t, exited(t, allDone, &logsAll), logsAll.String())
}

// TestServeAdoptsInRecordedDirs: a session served from one directory with
// a relative --workdir and --logs, whose serve process is killed, is
// resumed by a serve of the same file started from another directory
// without those flags — adopted as a running session of the file, or
// named again with --id: its tool works in the recorded work directory (a
// relative path lands there, not in the new process's directory) and its
// run directory is the recorded one.
func TestServeAdoptsInRecordedDirs(t *testing.T) {
	for name, again := range map[string][]string{"adopted": nil, "same id": {"--id", "w1"}} {
		t.Run(name, func(t *testing.T) { serveAdoptsInRecordedDirs(t, again) })
	}
}

func serveAdoptsInRecordedDirs(t *testing.T, again []string) {
	srv := brokertest.Start(t, brokertest.Listen("out", "adm"))
	url := srv.ClientURL()
	dir := t.TempDir()
	first, second := filepath.Join(dir, "first"), filepath.Join(dir, "second")
	require.NoError(t, os.Mkdir(first, 0o755))
	require.NoError(t, os.Mkdir(second, 0o755))
	file := effectsGraph(t, dir, "w", `echo "$SWITCHYARD_INPUT $(pwd)" >> out.txt`)
	watcher, err := nats.Connect(url, nats.Token("adm"))
	require.NoError(t, err)
	defer watcher.Close()
	pub := func(text string) {
		t.Helper()
		code, _, errOut := cli(t, "pub", "w1", "work", text, "--edge", "src:work", "--nats", url, "--token", "out")
		require.Equal(t, 0, code, errOut)
	}
	work, runs := filepath.Join(first, "work"), filepath.Join(first, "runs", "w1")

	var logs1, wlog syncBuffer
	events := watchEvents(t, watcher, "sy.w1.evt.>", &wlog)
	owner, ownerDone := startIn(t, first, &logs1, "serve", file, "--id", "w1", "--workdir", "work", "--logs", "runs",
		"--nats", url, "--token", "adm")
	events.wait("session.started", "")
	pub("m0")
	events.wait("node.completed", "work")
	require.Equal(t, []string{"m0 " + work}, lines(t, filepath.Join(work, "out.txt")))
	require.FileExists(t, filepath.Join(runs, "manifest.json"))
	require.NoError(t, owner.Process.Signal(syscall.SIGKILL))
	require.True(t, killed(<-ownerDone), logs1.String())
	// What the adopted session writes to its run directory is new.
	require.NoError(t, os.RemoveAll(filepath.Join(runs, "work")))
	pub("m1")

	var logs2 syncBuffer
	resumed := watchEvents(t, watcher, "sy.w1.evt.>", &wlog)
	adopter, adopterDone := startIn(t, second, &logs2, append([]string{"serve", file, "--nats", url, "--token", "adm"}, again...)...)
	resumed.wait("session.resumed", "")
	resumed.wait("node.completed", "work")
	if again == nil {
		waitLog(t, &logs2, "resumed session w1 (w)", 20*time.Second)
	}
	require.Equal(t, []string{"m0 " + work, "m1 " + work}, lines(t, filepath.Join(work, "out.txt")),
		"the adopted session works in its recorded work directory")
	require.NoFileExists(t, filepath.Join(second, "out.txt"))
	require.FileExists(t, filepath.Join(runs, "work", "status.json"), "the adopted session writes to its recorded run directory")
	require.NoDirExists(t, filepath.Join(second, ".switchyard", "sessions", "w1"))
	require.NoError(t, adopter.Process.Signal(syscall.SIGTERM))
	require.NoError(t, exited(t, adopterDone, &logs2), logs2.String())
}

// TestResumeOfServedSessionRefused: while a serve process runs a durable
// session — its tool in the middle of a firing — `resume S` and
// `run FILE --resume RUNDIR` in other processes are refused with who
// serves it (exit 1); the firing in flight is not run again.
func TestResumeOfServedSessionRefused(t *testing.T) {
	srv := brokertest.Start(t, brokertest.Listen("out", "adm"))
	url := srv.ClientURL()
	dir := t.TempDir()
	effects, release := filepath.Join(dir, "effects"), filepath.Join(dir, "release")
	file := effectsGraph(t, dir, "r", `echo "start $SWITCHYARD_INPUT" >> `+effects+
		`; while [ ! -e `+release+` ]; do sleep 0.05; done; echo "done $SWITCHYARD_INPUT" >> `+effects)
	bin := switchyardBinary(t)
	start := adminProcesses(t, bin, url, dir)
	watcher, err := nats.Connect(url, nats.Token("adm"))
	require.NoError(t, err)
	defer watcher.Close()

	var logs, wlog syncBuffer
	events := watchEvents(t, watcher, "sy.r1.evt.>", &wlog)
	owner, ownerDone := start(&logs, "serve", file, "--id", "r1")
	events.wait("session.started", "")
	code, _, errOut := cli(t, "pub", "r1", "work", "m0", "--edge", "src:work", "--nats", url, "--token", "out")
	require.Equal(t, 0, code, errOut)
	require.Eventually(t, func() bool {
		data, _ := os.ReadFile(effects)
		return len(data) > 0
	}, 20*time.Second, 20*time.Millisecond, "the tool never started (its file)")

	host, _ := os.Hostname()
	held := regexp.MustCompile(`session r1 is served by ` + regexp.QuoteMeta(host) + ` pid ` + fmt.Sprint(owner.Process.Pid) +
		` since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)
	for _, args := range [][]string{
		{"resume", "r1", "--logs", filepath.Join(dir, "logs2")},
		{"run", file, "--resume", filepath.Join(dir, "logs", "r1")},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, bin, append(args, "--nats", url, "--token", "adm")...)
		out, err := cmd.CombinedOutput()
		cancel()
		require.Error(t, err, "%v is refused: %s", args, out)
		require.Equal(t, 1, cmd.ProcessState.ExitCode(), "%v: %s", args, out)
		require.Regexp(t, held, string(out), args)
	}

	require.NoError(t, os.WriteFile(release, nil, 0o644))
	events.wait("node.completed", "work")
	code, _, errOut = cli(t, "stop", "r1", "--nats", url, "--token", "adm")
	require.Equal(t, 0, code, errOut)
	require.NoError(t, exited(t, ownerDone, &logs), logs.String())
	require.Equal(t, []string{"start m0", "done m0"}, lines(t, effects), "the firing ran once")
	require.Equal(t, 1, events.count("node.started", "work"))
	require.Equal(t, 0, events.count("session.resumed", ""))
}

// TestDataDirLockedAcrossProcesses: a serve process holds its embedded
// server's data directory; a serve and a run of another process on the
// same directory fail, naming the process that holds it. Once that
// process is killed the directory is free.
func TestDataDirLockedAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	file := effectsGraph(t, dir, "l", "true")
	pipeline, err := filepath.Abs("../../examples/hello.dot")
	require.NoError(t, err)
	bin := switchyardBinary(t)

	var logs syncBuffer
	first, firstDone := startIn(t, dir, &logs, "serve", file, "--id", "l1", "--data", data)
	waitLog(t, &logs, "serving "+file+" as session l1", 30*time.Second)
	inUse := "data directory " + data + " is in use by process " + fmt.Sprint(first.Process.Pid) +
		" (one embedded server per directory: stop it, or reach its sessions with --nats)"
	for _, args := range [][]string{
		{"serve", file, "--id", "l2", "--data", data},
		{"run", pipeline, "--data", data},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		cancel()
		require.Error(t, err, "%v: %s", args, out)
		require.Equal(t, 1, cmd.ProcessState.ExitCode(), "%v: %s", args, out)
		require.Contains(t, string(out), inUse, args)
	}
	require.NotContains(t, logs.String(), "l2")

	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	require.True(t, killed(<-firstDone), logs.String())
	cmd := exec.Command(bin, "run", pipeline, "--data", data)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the directory of a killed process is free: %s", out)
}
