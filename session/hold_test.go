package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/session"
)

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
		handled, unblock := brokertest.BusySubscriber(t, r.broker.Conn())
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
		_, unblock := brokertest.BusySubscriber(t, r.broker.Conn())
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
