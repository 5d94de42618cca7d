package brokertest_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/brokertest"
)

// TestProxyLoses: through a Proxy, DropNext drops one message by its reply
// subject and passes the rest; Lose drops everything the server sends on
// the connections of the moment, says when it lost a message by its reply
// subject, and after Cut the client reconnects and hears again.
func TestProxyLoses(t *testing.T) {
	srv := brokertest.StartCluster(t, 1)
	px := brokertest.StartProxy(t, srv.HostPort(0))
	reconnected := make(chan struct{}, 1)
	sub, err := nats.Connect(px.URL(), nats.ReconnectWait(50*time.Millisecond), nats.MaxReconnects(-1),
		nats.ReconnectHandler(func(*nats.Conn) { reconnected <- struct{}{} }))
	require.NoError(t, err)
	defer sub.Close()
	pub, err := nats.Connect(srv.URL())
	require.NoError(t, err)
	defer pub.Close()
	s, err := sub.SubscribeSync("x")
	require.NoError(t, err)
	require.NoError(t, sub.Flush())

	send := func(reply, data string) {
		require.NoError(t, pub.PublishMsg(&nats.Msg{Subject: "x", Reply: reply, Data: []byte(data)}))
		require.NoError(t, pub.Flush())
	}
	dropped := px.DropNext("drop.")
	send("keep.1", "a")
	send("drop.1", "b")
	send("drop.2", "c")
	for _, want := range []string{"a", "c"} {
		m, err := s.NextMsg(5 * time.Second)
		require.NoError(t, err)
		require.Equal(t, want, string(m.Data))
	}
	select {
	case <-dropped:
	default:
		t.Fatal("DropNext did not say it dropped")
	}

	lost := px.Lose("gone.")
	send("", "lost")
	send("kept.1", "lost too")
	require.NoError(t, pub.Flush())
	_, err = s.NextMsg(200 * time.Millisecond)
	require.ErrorIs(t, err, nats.ErrTimeout, "lost on the wire")
	select {
	case <-lost:
		t.Fatal("Lose said it lost a message of gone. before one was sent")
	default:
	}
	send("gone.1", "lost, and told")
	select {
	case <-lost:
	case <-time.After(10 * time.Second):
		t.Fatal("Lose did not say it lost the message of gone.")
	}
	px.Cut()
	select {
	case <-reconnected:
	case <-time.After(10 * time.Second):
		t.Fatal("the client did not reconnect")
	}
	require.NoError(t, sub.Flush())
	send("", "heard")
	m, err := s.NextMsg(5 * time.Second)
	require.NoError(t, err)
	require.Equal(t, "heard", string(m.Data))
}
