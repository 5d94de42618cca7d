package session_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/internal/crash"
	"github.com/switchyard/switchyard/session"
)

// burstDirEnv names the store of TestPreparedStoreKilled's child process.
const burstDirEnv = "SY_TEST_BURST_DIR"

// TestPreparedStoreKilled: a process killed (SIGKILL) right after it
// prepared the next pipeline's store leaves a store no session recorded:
// no listing shows it, and `gc` removes it — its lease names a process of
// this host that is gone — leaving the store empty. The child is this test
// binary, running two durable pipelines in a burst on the store, with the
// kill point store-prepared armed.
func TestPreparedStoreKilled(t *testing.T) {
	if dir := os.Getenv(burstDirEnv); dir != "" {
		defer session.SetPreparedBurst(time.Minute)()
		r := newRun(t, brokertest.Configure(func(c *broker.Config) { c.DataDir = dir }))
		burst(t, r) // killed while the third start's store is prepared
		t.Fatal("not killed at store-prepared")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestPreparedStoreKilled$", "-test.count=1")
	cmd.Env = append(os.Environ(), burstDirEnv+"="+dir, crash.Env+"=store-prepared:1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "the child was not killed: %v\n%s", err, out)
	ws, ok := ee.Sys().(syscall.WaitStatus)
	require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "the child was not killed: %v\n%s", err, out)

	b := brokertest.Start(t, brokertest.Configure(func(c *broker.Config) { c.DataDir = dir }))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The second pipeline of the burst may have been anywhere when the
	// kill came (the third's store is made beside it): ended and removed,
	// recorded and running (resumable), or not recorded yet.
	recorded := func() map[string]bool {
		listed, err := session.List(ctx, b)
		require.NoError(t, err)
		ids := map[string]bool{}
		for _, st := range listed {
			require.Equal(t, "running", st.Status, "only the second pipeline can be recorded, interrupted")
			ids[broker.KVName(st.ID)] = true
		}
		return ids
	}
	unrecorded := func() (n int) {
		buckets, _ := storeNames(t, b)
		ids := recorded()
		for _, name := range buckets {
			if !ids[name] {
				n++
			}
		}
		return n
	}
	require.Positive(t, unrecorded(), "the prepared store is left, recorded by no session")
	_, err = session.GC(ctx, b, time.Hour, time.Now(), false)
	require.NoError(t, err)
	require.Zero(t, unrecorded(), "gc removed every store no session recorded")
	_, streams := storeNames(t, b)
	require.Len(t, streams, len(recorded()), "and their work streams: %v", streams)
}
