package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/pool"
	"github.com/switchyard/switchyard/session"
)

// TestTakeoverDuringLongPoolJob: a pool job still runs on worker A, longer
// than the work stream's duplicate window (1 s here, the operator's
// setting, which the runtime keeps; 2 minutes by default), when its owner
// is SIGKILLed and a standby takes the session over. The standby fires the
// node again with the same attempt id, finds the job still in the work
// stream and leaves it there (event work.held): worker B, idle, never
// gets a second copy. The job's effect happens once, its outcome is
// committed once. And when worker A dies too (with its tool: the machine
// is gone), JetStream gives the job to worker B after the ack wait, with
// the same attempt id: two starts, one effect, one commit.
func TestTakeoverDuringLongPoolJob(t *testing.T) {
	const window = time.Second
	for _, tc := range []struct {
		name string
		// workerDies: worker A and its tool are SIGKILLed after the takeover.
		workerDies bool
	}{{"the job's worker finishes it", false}, {"the job's worker dies mid-job", true}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := brokertest.Start(t, brokertest.Listen("out", "adm"))
			url := srv.ClientURL()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			// The work stream as an operator configures it: a short
			// duplicate window, so that a job outlives it in seconds.
			js := srv.JetStream()
			require.NoError(t, pool.EnsureStream(ctx, js, srv.Storage(), 1))
			st, err := js.Stream(ctx, pool.Stream)
			require.NoError(t, err)
			cfg := st.CachedInfo().Config
			cfg.Duplicates = window
			_, err = js.UpdateStream(ctx, cfg)
			require.NoError(t, err)

			// starts.txt: every run; effects.txt: every run that got to
			// its side effect (after the release).
			tool := `echo "$SWITCHYARD_ATTEMPT_ID" >> starts.txt; echo $$ > pid; touch started; ` +
				`while [ ! -f release ]; do sleep 0.05; done; echo "$SWITCHYARD_ATTEMPT_ID" >> effects.txt; echo worked`
			r := newPoolTakeoverRig(t, url, "lj", tool)
			work, file, start, events, logsA, logsB := r.work, r.file, r.start, r.events, &r.logsA, &r.logsB

			owner, ownerDone := start(logsA, "serve", file, "--id", "lj")
			events.wait("session.started", "")
			a := startWorker(t, srv, "adm", "--pool", "cpu", "--workdir", work, "--ack-wait", "2s")
			// Before the worker's own cleanup (which waits for its job to
			// end): a failed test releases the job, the worker stops.
			t.Cleanup(func() { _ = os.WriteFile(filepath.Join(work, "release"), nil, 0o644) })
			code, _, errOut := cli(t, "pub", "lj", "job", "go", "--nats", url, "--token", "out")
			require.Equal(t, 0, code, errOut)
			started := a.waitLine(t, 30*time.Second, "job started", "node=job")
			waitFile(t, filepath.Join(work, "started"))
			events.wait("work.queued", "job")
			// Worker B joins once A holds the job: it takes any copy queued
			// again.
			b := startWorker(t, srv, "adm", "--pool", "cpu", "--workdir", work, "--ack-wait", "2s")
			// Its cleanup (which waits for its job) comes after a release.
			t.Cleanup(func() { _ = os.WriteFile(filepath.Join(work, "release"), nil, 0o644) })

			require.NoError(t, owner.Process.Signal(syscall.SIGKILL))
			require.True(t, killed(<-ownerDone), logsA.String())
			// The job is older than the duplicate window before anyone
			// fires it again.
			info, err := st.Info(ctx)
			require.NoError(t, err)
			require.EqualValues(t, 1, info.State.Msgs, "the running job is in the work stream")
			queued, err := st.GetMsg(ctx, info.State.FirstSeq)
			require.NoError(t, err)
			for time.Since(queued.Time) <= window+200*time.Millisecond {
				wait := time.NewTimer(queued.Time.Add(window + 250*time.Millisecond).Sub(time.Now()))
				select {
				case <-ctx.Done():
					t.Fatal(ctx.Err())
				case <-wait.C:
				}
			}

			standby, standbyDone := start(logsB, "serve", "--all", "--takeover")
			events.wait("session.resumed", "")
			// The standby either leaves the job where it is or queues it
			// again: wait for whichever it does.
			deadline := time.Now().Add(30 * time.Second)
			for events.count("work.held", "job")+events.count("work.queued", "job") < 2 {
				require.True(t, time.Now().Before(deadline), "the standby never fired job again:\n%s", logsB.String())
				time.Sleep(20 * time.Millisecond)
			}
			require.Equal(t, 1, events.count("work.queued", "job"), "the standby queued the running job again")
			require.Equal(t, 1, events.count("work.held", "job"))

			if tc.workerDies {
				data, err := os.ReadFile(filepath.Join(work, "pid"))
				require.NoError(t, err)
				pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
				require.NoError(t, err)
				a.kill()
				// The tool is its own process group (nodes/tool.go):
				// what dies with the machine.
				require.NoError(t, syscall.Kill(-pid, syscall.SIGKILL))
				again := b.waitLine(t, 30*time.Second, "job started", "node=job")
				require.Equal(t, jobOf(started), jobOf(again), "the redelivered job keeps its attempt id")
			}
			require.NoError(t, os.WriteFile(filepath.Join(work, "release"), nil, 0o644))
			events.wait("node.completed", "job")
			events.wait("node.completed", "after")
			// The job left the stream (acked), and no copy is left behind.
			deadline = time.Now().Add(30 * time.Second)
			for {
				info, err = st.Info(ctx)
				require.NoError(t, err)
				if info.State.Msgs == 0 {
					break
				}
				require.True(t, time.Now().Before(deadline), "jobs left in the work stream: %d", info.State.Msgs)
				time.Sleep(20 * time.Millisecond)
			}

			require.NoError(t, standby.Process.Signal(syscall.SIGTERM))
			select {
			case err := <-standbyDone:
				require.NoError(t, err, logsB.String())
			case <-time.After(30 * time.Second):
				t.Fatal("the standby did not stop")
			}
			require.Equal(t, 1, events.count("node.completed", "job"), "the job's outcome is committed once")
			require.Equal(t, 1, events.count("node.completed", "after"))
			lines := func(name string) []string {
				data, err := os.ReadFile(filepath.Join(work, name))
				require.NoError(t, err)
				return strings.Fields(string(data))
			}
			id := jobOf(started)
			require.Equal(t, []string{id}, lines("effects.txt"), "the job's effect happened once, as the attempt the owner sent")
			if tc.workerDies {
				require.Equal(t, []string{id, id}, lines("starts.txt"), "started on A, then on B, as the same attempt")
			} else {
				require.Equal(t, []string{id}, lines("starts.txt"), "the job ran once")
			}

			hist, err := session.History(ctx, srv, "lj")
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
