package session_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/session"
)

// busySubscriber subscribes on nc a handler that blocks on the first of two
// messages until unblock is closed, and returns once it does: the second
// message waits at the subscription, received and not handled.
func busySubscriber(t *testing.T, nc *nats.Conn) (handled func() int, unblock chan struct{}) {
	t.Helper()
	var mu sync.Mutex
	n := 0
	entered, unblock := make(chan struct{}), make(chan struct{})
	_, err := nc.Subscribe("test.busy", func(*nats.Msg) {
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		if first {
			close(entered)
			<-unblock
		}
	})
	require.NoError(t, err)
	require.NoError(t, nc.Publish("test.busy", nil))
	require.NoError(t, nc.Publish("test.busy", nil))
	require.NoError(t, nc.Flush())
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the subscriber got no message")
	}
	return func() int { mu.Lock(); defer mu.Unlock(); return n }, unblock
}

// closeBroker closes r's broker on another goroutine and returns its result.
func closeBroker(r *run) chan error {
	closed := make(chan error, 1)
	go func() { closed <- r.broker.Close() }()
	return closed
}

// A session holds its broker's connection from its start until it stops:
// the broker's Close drains the connection under a running session (what
// its subscriptions received is handled, as a crash test that closes the
// broker under a session relies on), and closes it at once when no
// session runs (a drain costs every command 20 ms at exit).
func TestSessionHoldsItsBrokerUntilStopped(t *testing.T) {
	src := `digraph d { start [shape=Mdiamond]; exit [shape=Msquare]; w [type="custom.wait"]; start -> w -> exit }`
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	t.Run("running", func(t *testing.T) {
		r := newRun(t)
		entered, release := make(chan struct{}), make(chan struct{})
		defer close(release)
		r.waitFor(entered, release)
		s, err := session.Start(ctx, r.durable(src, "held"))
		require.NoError(t, err)
		defer s.Stop()
		<-entered
		handled, unblock := busySubscriber(t, r.broker.Conn())
		nc := r.broker.Conn()
		closed := closeBroker(r)
		require.Eventually(t, func() bool { return nc.IsDraining() || nc.IsClosed() }, 10*time.Second, time.Millisecond, "Close has not begun")
		require.True(t, nc.IsDraining(), "Close drains the connection under a running session")
		close(unblock)
		select {
		case err := <-closed:
			require.NoError(t, err)
		case <-ctx.Done():
			t.Fatal("Close did not return")
		}
		require.Equal(t, 2, handled(), "drained: the message waiting at the subscription was handled before the connection closed")
	})
	t.Run("stopped", func(t *testing.T) {
		r := newRun(t)
		s, rep := r.runSession(r.durable(`digraph d { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }`, "done"))
		require.Equal(t, "success", rep.Status)
		s.Stop()
		_, unblock := busySubscriber(t, r.broker.Conn())
		defer close(unblock)
		closed := closeBroker(r)
		select {
		case err := <-closed:
			require.NoError(t, err)
		case <-time.After(5 * time.Second): // a drain would wait for the busy handler (up to 10 s)
			t.Fatal("Close waited for a subscription with no session running")
		}
	})
}
