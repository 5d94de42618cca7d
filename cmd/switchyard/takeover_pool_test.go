package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/session"
)

// TestTakeoverDuringPoolJob: the owner of a session dispatches a pool job
// to a worker process and is SIGKILLed while the job runs; a serve
// --takeover standby takes the session over. The job runs once, its
// outcome is committed once (the same attempt id) and the session goes on
// to the next node — whether the worker finishes while nobody owns the
// session (its outcome must wait for the new owner) or after the takeover.
func TestTakeoverDuringPoolJob(t *testing.T) {
	for _, tc := range []struct {
		name string
		// finishFirst: the job ends before the standby starts.
		finishFirst bool
	}{{"job ends while nobody owns the session", true}, {"job ends after the takeover", false}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := brokertest.Start(t, brokertest.Listen("out", "adm"),
				brokertest.Configure(func(c *broker.Config) { c.WorkerToken = "wk" }))
			url := srv.ClientURL()
			tool := `echo "$SWITCHYARD_ATTEMPT_ID" >> starts.txt; touch started; while [ ! -f release ]; do sleep 0.05; done; echo worked`
			r := newPoolTakeoverRig(t, url, "pj", tool)
			work, file, start, events, logsA, logsB := r.work, r.file, r.start, r.events, &r.logsA, &r.logsB

			owner, ownerDone := start(logsA, "serve", file, "--id", "pj")
			events.wait("session.started", "")
			w := startWorker(t, srv, "wk", "--pool", "cpu", "--workdir", work)
			// Before the worker's own cleanup (which waits for its job to
			// end): a failed test releases the job, the worker stops.
			t.Cleanup(func() { _ = os.WriteFile(filepath.Join(work, "release"), nil, 0o644) })
			code, _, errOut := cli(t, "pub", "pj", "job", "go", "--nats", url, "--token", "out")
			require.Equal(t, 0, code, errOut)
			started := w.waitLine(t, 30*time.Second, "job started", "node=job")
			waitFile(t, filepath.Join(work, "started"))

			require.NoError(t, owner.Process.Signal(syscall.SIGKILL))
			require.True(t, killed(<-ownerDone), logsA.String())
			if tc.finishFirst {
				require.NoError(t, os.WriteFile(filepath.Join(work, "release"), nil, 0o644))
				w.waitLine(t, 30*time.Second, "job done", "status=success")
			}
			standby, standbyDone := start(logsB, "serve", "--all", "--takeover")
			events.wait("session.resumed", "")
			if !tc.finishFirst {
				require.NoError(t, os.WriteFile(filepath.Join(work, "release"), nil, 0o644))
			}
			events.wait("node.completed", "job")
			events.wait("node.completed", "after")

			require.NoError(t, standby.Process.Signal(syscall.SIGTERM))
			select {
			case err := <-standbyDone:
				require.NoError(t, err, logsB.String())
			case <-time.After(30 * time.Second):
				t.Fatal("the standby did not stop")
			}
			require.Equal(t, 1, events.count("node.completed", "job"), "the job's outcome is committed once")
			require.Equal(t, 1, events.count("node.completed", "after"))
			data, err := os.ReadFile(filepath.Join(work, "starts.txt"))
			require.NoError(t, err)
			runs := strings.Fields(string(data))
			require.Equal(t, []string{jobOf(started)}, runs, "the job ran once, as the attempt the owner sent")

			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			hist, err := session.History(ctx, srv, "pj")
			require.NoError(t, err)
			fired := 0
			for _, h := range hist {
				if h.Node == "job" {
					fired++
				}
			}
			require.Equal(t, 1, fired, "one firing of job in the journal")
		})
	}
}

// waitFile waits (up to 30 s) for path to exist.
func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		require.True(t, time.Now().Before(deadline), "%s never appeared", path)
		time.Sleep(20 * time.Millisecond)
	}
}

// poolTakeoverRig is a session whose node job runs tool on pool cpu (in
// work), then node after; the serve processes of its owner and standby
// against url, started by start, log to logsA and logsB; events are the
// session's.
type poolTakeoverRig struct {
	work, file   string
	start        func(log *syncBuffer, args ...string) (*exec.Cmd, chan error)
	events       *eventWaiter
	logsA, logsB syncBuffer
}

func newPoolTakeoverRig(t *testing.T, url, id, tool string) *poolTakeoverRig {
	t.Helper()
	dir := t.TempDir()
	r := &poolTakeoverRig{work: filepath.Join(dir, "work"), file: filepath.Join(dir, id+".dot")}
	require.NoError(t, os.MkdirAll(r.work, 0o755))
	require.NoError(t, os.WriteFile(r.file, []byte(`digraph `+id+` {
    kind="session"
    stall_after=0
    job   [shape=parallelogram, pool=cpu, tool_command=`+quote(tool)+`]
    after [shape=parallelogram, tool_command="echo after"]
    job -> after
}`), 0o644))
	r.start = adminProcesses(t, switchyardBinary(t), url, dir)
	watcher, err := nats.Connect(url, nats.Token("adm"))
	require.NoError(t, err)
	t.Cleanup(watcher.Close)
	var wlog syncBuffer
	r.events = watchEvents(t, watcher, "sy."+id+".evt.>", &wlog)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("owner:\n%s\nstandby:\n%s", r.logsA.String(), r.logsB.String())
		}
	})
	return r
}
