package broker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/internal/brokertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestEmbeddedHasNoListenerAndRunsJetStream(t *testing.T) {
	b := brokertest.Start(t)
	require.True(t, b.Embedded())
	require.Empty(t, b.ClientURL(), "no TCP listener unless asked")

	_, err := broker.EnsureSessionStream(ctx(t), b.JetStream(), "s1", broker.FileStorage)
	require.NoError(t, err)
	ack, err := b.JetStream().Publish(ctx(t), broker.Edge("s1", "a.b"), []byte("x"), jetstreamMsgID("id-1"))
	require.NoError(t, err)
	require.Equal(t, broker.StreamName("s1"), ack.Stream)
	again, err := b.JetStream().Publish(ctx(t), broker.Edge("s1", "a.b"), []byte("x"), jetstreamMsgID("id-1"))
	require.NoError(t, err)
	require.True(t, again.Duplicate, "the same id is de-duplicated")

	kv, err := broker.SessionKV(ctx(t), b.JetStream(), "s1", broker.FileStorage)
	require.NoError(t, err)
	_, err = kv.Put(ctx(t), "checkpoint", []byte("v1"))
	require.NoError(t, err)
	e, err := kv.Get(ctx(t), "checkpoint")
	require.NoError(t, err)
	require.Equal(t, "v1", string(e.Value()))

	obj, err := broker.SessionObjects(ctx(t), b.JetStream(), "s1", broker.FileStorage)
	require.NoError(t, err)
	_, err = obj.PutBytes(ctx(t), "report.md", []byte("# report"))
	require.NoError(t, err)

	require.NoError(t, broker.DeleteSession(ctx(t), b.JetStream(), "s1"))
	_, err = b.JetStream().Stream(ctx(t), broker.StreamName("s1"))
	require.Error(t, err)
}

func TestCloseIsIdempotent(t *testing.T) {
	cfg := broker.DefaultConfig()
	cfg.DataDir = t.TempDir()
	b, err := broker.Start(ctx(t), cfg)
	require.NoError(t, err)
	require.NoError(t, b.Close())
	require.NoError(t, b.Close())
	require.True(t, b.Conn().IsClosed())
}

func TestListenerRequiresCredentials(t *testing.T) {
	cfg := broker.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen = "127.0.0.1:0"
	_, err := broker.Start(ctx(t), cfg)
	require.ErrorContains(t, err, "credentials")
}

func TestOutsidePermissions(t *testing.T) {
	b := brokertest.Start(t, brokertest.Listen("outside-secret", "admin-secret"))
	url := b.ClientURL()
	require.NotEmpty(t, url)

	_, err := nats.Connect(url)
	require.Error(t, err, "no credentials, no connection")
	_, err = nats.Connect(url, nats.Token("wrong"))
	require.Error(t, err)

	denied := make(chan error, 4)
	out, err := nats.Connect(url, nats.Token("outside-secret"),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { denied <- err }))
	require.NoError(t, err)
	defer out.Close()

	got := make(chan *nats.Msg, 4)
	sub, err := b.Conn().ChanSubscribe("sy.s1.>", got)
	require.NoError(t, err)
	defer sub.Unsubscribe()
	require.NoError(t, b.Conn().Flush())

	require.NoError(t, out.Publish(broker.Control("s1", "trigger"), []byte("x")))
	require.NoError(t, out.Publish(broker.NodeIn("s1", "a"), []byte("hello")))
	require.NoError(t, out.Flush())

	select {
	case err := <-denied:
		require.True(t, errors.Is(err, nats.ErrPermissionViolation), "got %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the control publish was not denied")
	}
	select {
	case m := <-got:
		require.Equal(t, broker.NodeIn("s1", "a"), m.Subject, "only the inbox publish arrives")
	case <-time.After(10 * time.Second):
		t.Fatal("the inbox publish did not arrive")
	}

	admin, err := nats.Connect(url, nats.Token("admin-secret"))
	require.NoError(t, err)
	defer admin.Close()
	require.NoError(t, admin.Publish(broker.Control("s1", "trigger"), []byte("y")))
	select {
	case m := <-got:
		require.Equal(t, broker.Control("s1", "trigger"), m.Subject, "the admin may publish on control subjects")
	case <-time.After(10 * time.Second):
		t.Fatal("the admin publish did not arrive")
	}
}

// TestExternalServerRestart connects to a server by URL, restarts that
// server, and checks that what was published while it was down arrives.
func TestExternalServerRestart(t *testing.T) {
	dir := t.TempDir()
	start := func(listen string) *broker.Broker {
		cfg := broker.DefaultConfig()
		cfg.DataDir = dir
		cfg.Listen = listen
		cfg.Token = "tok"
		b, err := broker.Start(ctx(t), cfg)
		require.NoError(t, err)
		return b
	}
	srv := start("127.0.0.1:0")
	url := srv.ClientURL()
	_, err := broker.EnsureSessionStream(ctx(t), srv.JetStream(), "s1", broker.FileStorage)
	require.NoError(t, err)
	ext, err := broker.Start(ctx(t), broker.Config{URL: url, Token: "tok"})
	require.NoError(t, err)
	defer ext.Close()
	require.False(t, ext.Embedded())

	disconnected := make(chan struct{}, 1)
	reconnected := make(chan struct{}, 1)
	ext.Conn().SetDisconnectErrHandler(func(*nats.Conn, error) { disconnected <- struct{}{} })
	ext.Conn().SetReconnectHandler(func(*nats.Conn) { reconnected <- struct{}{} })

	require.NoError(t, srv.Close())
	select {
	case <-disconnected:
	case <-time.After(10 * time.Second):
		t.Fatal("no disconnect")
	}
	for i := 0; i < 3; i++ {
		require.NoError(t, ext.Conn().Publish(broker.NodeIn("s1", "a"), []byte{byte('0' + i)}), "buffered while down")
	}
	srv = start(url[len("nats://"):])
	defer srv.Close()
	select {
	case <-reconnected:
	case <-time.After(20 * time.Second):
		t.Fatal("no reconnect")
	}
	require.NoError(t, ext.Conn().Flush())
	// The buffered publishes went out on reconnect and the stream, which
	// survived the restart on disk, holds all three.
	st, err := srv.JetStream().Stream(ctx(t), broker.StreamName("s1"))
	require.NoError(t, err)
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := st.Info(ctx(t))
		require.NoError(t, err)
		if info.State.Msgs == 3 {
			break
		}
		require.True(t, time.Now().Before(deadline), "stream holds %d of 3 messages", info.State.Msgs)
		select {
		case <-time.After(20 * time.Millisecond): // poll interval of a deadline-bounded wait
		case <-ctx(t).Done():
		}
	}
}
