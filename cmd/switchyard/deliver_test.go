package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/internal/brokertest"
)

// pub takes "no responders" for "no session" only once it lasts: a server
// of a cluster just restarted does not know for a moment who listens
// where (found by the cluster chaos suite: pub exited 1 with "no session"
// for a live session). Here the session's stream appears while pub asks;
// its envelope is acknowledged. A session that never appears is reported.
func TestPubRidesThroughNoResponders(t *testing.T) {
	b := brokertest.Start(t, brokertest.Listen("out", "adm"))
	url := b.ClientURL()
	type result struct {
		code        int
		out, errOut string
	}
	done := make(chan result, 1)
	go func() {
		code, out, errOut := cli(t, "pub", "late", "work", "hello", "--edge", "src:work", "--nats", url, "--token", "out", "--timeout", "1s")
		done <- result{code, out, errOut}
	}()
	// No stream yet: pub's first attempts get no responders.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for !b.Interest("sy.late.edge.src.work") {
		select {
		case r := <-done:
			t.Fatalf("pub gave up before the stream appeared: %d %s", r.code, r.errOut)
		case <-time.After(300 * time.Millisecond): // pub's second attempt is under way
		}
		_, err := broker.EnsureSessionStream(ctx, b.JetStream(), "late", b.Storage())
		require.NoError(t, err)
	}
	r := <-done
	require.Equal(t, 0, r.code, r.errOut)
	require.Contains(t, r.out, "stored: "+broker.StreamName("late"))

	began := time.Now()
	code, _, errOut := cli(t, "pub", "nosession", "work", "hello", "--nats", url, "--token", "out", "--timeout", "1s", "--retry-for", "3s")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "no session nosession on "+url)
	require.Less(t, time.Since(began), 10*time.Second)
}
