package session_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/internal/crash"
	"github.com/switchyard/switchyard/internal/testio"
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
	require.True(t, testio.Killed(err), "the child was not killed: %v\n%s", err, out)

	b := brokertest.Start(t, brokertest.Configure(func(c *broker.Config) { c.DataDir = dir }))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The second pipeline of the burst may have been anywhere when the
	// kill came (the third's store is made beside it): not recorded yet,
	// recorded and running (resumable), ended and not yet removed, or
	// removed.
	unrecorded := func() (buckets, streams []string) {
		listed, err := session.List(ctx, b)
		require.NoError(t, err)
		ids := map[string]bool{}
		for _, st := range listed {
			ids[st.ID] = true
		}
		bs, ss := storeNames(t, b)
		for _, name := range bs {
			if !ids[strings.TrimPrefix(name, broker.KVName(""))] {
				buckets = append(buckets, name)
			}
		}
		for _, name := range ss {
			if !ids[strings.TrimPrefix(name, broker.StreamName(""))] {
				streams = append(streams, name)
			}
		}
		return buckets, streams
	}
	buckets, _ := unrecorded()
	require.NotEmpty(t, buckets, "the prepared store is left, recorded by no session")
	_, err = session.GC(ctx, b, time.Hour, time.Now(), false)
	require.NoError(t, err)
	buckets, streams := unrecorded()
	require.Empty(t, buckets, "gc removed every store no session recorded")
	require.Empty(t, streams, "and every work stream no session recorded")
}
