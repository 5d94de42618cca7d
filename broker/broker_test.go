package broker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/internal/testio"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestEmbeddedDefaults(t *testing.T) {
	b := brokertest.Start(t)
	require.True(t, b.Embedded())
	require.NotNil(t, b.Server())
	require.Empty(t, b.ClientURL(), "no TCP listener unless asked")
	require.Nil(t, b.Server().Addr(), "the server has no listener at all")
	require.Equal(t, broker.FileStorage, b.Storage())

	t.Run("core publish and subscribe", func(t *testing.T) {
		other, err := b.NewConn()
		require.NoError(t, err)
		defer other.Close()
		got := make(chan *nats.Msg, 1)
		sub, err := other.ChanSubscribe(broker.NodeIn("s1", "a"), got)
		require.NoError(t, err)
		defer func() { require.NoError(t, sub.Unsubscribe()) }()
		require.NoError(t, other.Flush())
		require.NoError(t, b.Conn().Publish(broker.NodeIn("s1", "a"), []byte("hi")))
		require.Equal(t, "hi", string(recv(t, got, 10*time.Second, "message").Data))
	})
	t.Run("JetStream publish ack and KV", func(t *testing.T) {
		_, err := broker.EnsureSessionStream(ctx(t), b.JetStream(), "s1", b.Storage())
		require.NoError(t, err)
		ack, err := b.JetStream().Publish(ctx(t), broker.Edge("s1", "a.b"), []byte("x"))
		require.NoError(t, err)
		require.EqualValues(t, 1, ack.Sequence)
		kv, err := broker.SessionKV(ctx(t), b.JetStream(), "s1", b.Storage())
		require.NoError(t, err)
		_, err = kv.Put(ctx(t), "k", []byte("v"))
		require.NoError(t, err)
		e, err := kv.Get(ctx(t), "k")
		require.NoError(t, err)
		require.Equal(t, "v", string(e.Value()))
	})
	t.Run("no subscription-list cache, and wildcards still route", func(t *testing.T) {
		// Subjects published on stay out of any cache the server would walk
		// at each wildcard subscription made or removed (serverOptions).
		other, err := b.NewConn()
		require.NoError(t, err)
		defer other.Close()
		got := make(chan *nats.Msg, 64)
		sub, err := other.ChanSubscribe(broker.Edge("s2", ">"), got)
		require.NoError(t, err)
		require.NoError(t, other.Flush())
		for i := range 20 {
			require.NoError(t, b.Conn().Publish(broker.Edge("s2", fmt.Sprintf("a.b%d", i)), []byte("x")))
		}
		for range 20 {
			recv(t, got, 10*time.Second, "message on a wildcard")
		}
		require.NoError(t, sub.Unsubscribe())
		require.NoError(t, other.Flush())
		sz, err := b.Server().Subsz(nil)
		require.NoError(t, err)
		require.Zero(t, sz.NumCache, "subjects cached by the server's subscription list")
	})
}

func TestCloseIsIdempotentAndStopsTheServer(t *testing.T) {
	cfg := broker.DefaultConfig()
	cfg.DataDir = t.TempDir()
	b, err := broker.Start(ctx(t), cfg)
	require.NoError(t, err)
	extra, err := b.NewConn()
	require.NoError(t, err)
	defer extra.Close()
	require.NoError(t, b.Close())
	require.NoError(t, b.Close())
	require.True(t, b.Conn().IsClosed())
	require.False(t, b.Server().Running())
	_, err = os.Stat(filepath.Join(cfg.DataDir, "jetstream"))
	require.NoError(t, err, "the store stays on disk")

	// Concurrent closes are safe too.
	b, err = broker.Start(ctx(t), cfg)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { require.NoError(t, b.Close()) })
	}
	wg.Wait()
}

func TestDataSurvivesARestart(t *testing.T) {
	cfg := broker.DefaultConfig()
	cfg.DataDir = t.TempDir()
	b, err := broker.Start(ctx(t), cfg)
	require.NoError(t, err)
	kv, err := broker.SessionKV(ctx(t), b.JetStream(), "s1", broker.FileStorage)
	require.NoError(t, err)
	_, err = kv.Put(ctx(t), "checkpoint", []byte("c1"))
	require.NoError(t, err)
	require.NoError(t, b.Close())

	b, err = broker.Start(ctx(t), cfg)
	require.NoError(t, err)
	defer b.Close()
	kv, err = broker.SessionKV(ctx(t), b.JetStream(), "s1", broker.FileStorage)
	require.NoError(t, err)
	e, err := kv.Get(ctx(t), "checkpoint")
	require.NoError(t, err)
	require.Equal(t, "c1", string(e.Value()))
}

// What JetStream acknowledged just before Close is kept; the store's
// directory is the broker's DataDir.
func TestCloseKeepsWhatWasAcknowledged(t *testing.T) {
	cfg := broker.DefaultConfig()
	cfg.DataDir = t.TempDir()
	b, err := broker.Start(ctx(t), cfg)
	require.NoError(t, err)
	require.Equal(t, cfg.DataDir, b.DataDir())
	_, err = broker.EnsureSessionStream(ctx(t), b.JetStream(), "s1", broker.FileStorage)
	require.NoError(t, err)
	for i := range 100 {
		_, err := b.JetStream().PublishAsync(broker.NodeIn("s1", "a"), []byte{byte(i)})
		require.NoError(t, err)
	}
	recv(t, b.JetStream().PublishAsyncComplete(), 10*time.Second, "the acknowledgements")
	require.NoError(t, b.Close())

	b, err = broker.Start(ctx(t), cfg)
	require.NoError(t, err)
	defer b.Close()
	st, err := b.JetStream().Stream(ctx(t), broker.StreamName("s1"))
	require.NoError(t, err)
	require.Equal(t, uint64(100), st.CachedInfo().State.Msgs)
}

func TestMemoryBrokerUsesATemporaryStore(t *testing.T) {
	b, err := broker.Start(ctx(t), broker.Config{Memory: true})
	require.NoError(t, err)
	require.Equal(t, broker.MemoryStorage, b.Storage())
	dir := b.Server().JetStreamConfig().StoreDir
	require.NotEmpty(t, dir)
	_, err = os.Stat(dir)
	require.NoError(t, err)
	st, err := broker.EnsureSessionStream(ctx(t), b.JetStream(), "s1", b.Storage())
	require.NoError(t, err)
	require.Equal(t, jetstream.MemoryStorage, st.CachedInfo().Config.Storage)
	require.NoError(t, b.Close())
	_, err = os.Stat(dir)
	require.ErrorIs(t, err, os.ErrNotExist, "Close removes the temporary store")
}

type syncBuffer = testio.SyncBuffer

func TestServerLogGoesToTheLogger(t *testing.T) {
	var buf syncBuffer
	cfg := broker.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Logger = slog.New(slog.NewTextHandler(&buf, nil))
	b, err := broker.Start(ctx(t), cfg)
	require.NoError(t, err)
	require.NoError(t, b.Close())
	out := buf.String()
	require.Contains(t, out, "component=nats-server")
	require.Contains(t, out, "level=INFO")
	require.Contains(t, out, "Server is ready")
	require.NotContains(t, out, "level=DEBUG", "debug and trace are off")
}

func TestBusyPortFailsAtOnce(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	cfg := broker.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen = l.Addr().String()
	cfg.Token = "tok"
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	_, err = broker.Start(c, cfg)
	require.ErrorContains(t, err, "listening")
	require.Less(t, time.Since(start), 10*time.Second, "the server's fatal error ends the wait")
}

func TestStartHonoursContext(t *testing.T) {
	cfg := broker.DefaultConfig()
	cfg.DataDir = t.TempDir()
	c, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := broker.Start(c, cfg)
	require.ErrorIs(t, err, context.Canceled)
}

// external starts a listening embedded server on dir (random port when
// listen is 127.0.0.1:0) to play an external server.
func external(t *testing.T, dir, listen string) *broker.Broker {
	t.Helper()
	cfg := broker.DefaultConfig()
	cfg.DataDir = dir
	cfg.Listen = listen
	cfg.Token = "tok"
	cfg.AdminToken = "admin-tok"
	b, err := broker.Start(ctx(t), cfg)
	require.NoError(t, err)
	return b
}

func TestExternalServer(t *testing.T) {
	srv := external(t, t.TempDir(), "127.0.0.1:0")
	defer srv.Close()
	url := srv.ClientURL()
	require.True(t, strings.HasPrefix(url, "nats://127.0.0.1:"), url)

	_, err := broker.Start(ctx(t), broker.Config{URL: url, Token: "wrong"})
	require.Error(t, err)

	ext, err := broker.Start(ctx(t), broker.Config{URL: url, Token: "admin-tok"})
	require.NoError(t, err)
	defer ext.Close()
	require.False(t, ext.Embedded())
	require.Nil(t, ext.Server())
	require.Equal(t, url, ext.ClientURL())

	_, err = broker.EnsureSessionStream(ctx(t), ext.JetStream(), "s1", broker.FileStorage)
	require.NoError(t, err)
	ack, err := ext.JetStream().Publish(ctx(t), broker.Edge("s1", "a.b"), []byte("x"))
	require.NoError(t, err)
	require.Equal(t, "SY_s1", ack.Stream)

	nc, err := ext.NewConn()
	require.NoError(t, err)
	defer nc.Close()
	require.Equal(t, url, nc.ConnectedUrl())
	require.NoError(t, ext.Close())
	require.NoError(t, ext.Close())
}

// TestExternalServerRestart connects to a server by URL, restarts that
// server on the same port and store, and checks that what was published
// while it was down arrives.
func TestExternalServerRestart(t *testing.T) {
	dir := t.TempDir()
	srv := external(t, dir, "127.0.0.1:0")
	url := srv.ClientURL()
	_, err := broker.EnsureSessionStream(ctx(t), srv.JetStream(), "s1", broker.FileStorage)
	require.NoError(t, err)

	disconnected := make(chan struct{}, 1)
	reconnected := make(chan struct{}, 1)
	ext, err := broker.Start(ctx(t), broker.Config{URL: url, Token: "tok"})
	require.NoError(t, err)
	defer ext.Close()
	ext.Conn().SetDisconnectErrHandler(func(*nats.Conn, error) {
		select {
		case disconnected <- struct{}{}:
		default:
		}
	})
	ext.Conn().SetReconnectHandler(func(*nats.Conn) { reconnected <- struct{}{} })

	require.NoError(t, srv.Close())
	recv(t, disconnected, 10*time.Second, "disconnect")
	for i := range 3 {
		require.NoError(t, ext.Conn().Publish(broker.NodeIn("s1", "a"), []byte{byte('0' + i)}), "buffered while down")
	}
	buffered, err := ext.Conn().Buffered()
	require.NoError(t, err)
	require.Positive(t, buffered)

	srv = external(t, dir, strings.TrimPrefix(url, "nats://"))
	defer srv.Close()
	recv(t, reconnected, 20*time.Second, "reconnect")
	require.NoError(t, ext.Conn().Flush())
	// The buffered publishes went out on reconnect, and the stream, which
	// survived the restart on disk, holds all three in order.
	st, err := srv.JetStream().Stream(ctx(t), broker.StreamName("s1"))
	require.NoError(t, err)
	eventually(t, 10*time.Second, 10*time.Millisecond, func() (bool, string) {
		info, err := st.Info(ctx(t))
		require.NoError(t, err)
		return info.State.Msgs == 3, fmt.Sprintf("the stream holds %d of 3", info.State.Msgs)
	})
	for seq := uint64(1); seq <= 3; seq++ {
		m, err := st.GetMsg(ctx(t), seq)
		require.NoError(t, err)
		require.Equal(t, []byte{byte('0' + seq - 1)}, m.Data)
	}
}

func TestCloseWhileTheExternalServerIsDown(t *testing.T) {
	srv := external(t, t.TempDir(), "127.0.0.1:0")
	ext, err := broker.Start(ctx(t), broker.Config{URL: srv.ClientURL(), Token: "tok"})
	require.NoError(t, err)
	down := make(chan struct{}, 1)
	ext.Conn().SetDisconnectErrHandler(func(*nats.Conn, error) {
		select {
		case down <- struct{}{}:
		default:
		}
	})
	require.NoError(t, srv.Close())
	recv(t, down, 10*time.Second, "disconnect")
	err = ext.Close()
	require.False(t, errors.Is(err, nats.ErrConnectionReconnecting), "nothing to drain is not an error: %v", err)
	require.NoError(t, err)
	require.True(t, ext.Conn().IsClosed())
}

// Two embedded servers on one JetStream directory corrupt it: the second
// process is refused, clearly, and the directory is free again once the
// first closes.
func TestDataDirLocked(t *testing.T) {
	dir := t.TempDir()
	cfg := broker.Config{DataDir: dir, ServerName: "first"}
	first, err := broker.Start(ctx(t), cfg)
	require.NoError(t, err)
	_, err = broker.Start(ctx(t), broker.Config{DataDir: dir, ServerName: "second"})
	require.ErrorContains(t, err, "data directory "+dir+" is in use by process "+fmt.Sprint(os.Getpid()))
	require.NoError(t, first.Close())
	again, err := broker.Start(ctx(t), cfg)
	require.NoError(t, err)
	require.NoError(t, again.Close())
}

// TestSibling: a sibling shares its broker's server and store through a
// connection of its own — a stream it makes is the broker's, what it
// publishes reaches the broker's subscribers — and its Close leaves the
// server running and the broker working.
func TestSibling(t *testing.T) {
	b := brokertest.Start(t)
	sib, err := b.Sibling()
	require.NoError(t, err)
	require.NotSame(t, b.Conn(), sib.Conn(), "a connection of its own")
	require.Equal(t, b.Storage(), sib.Storage())
	require.Equal(t, b.DataDir(), sib.DataDir())

	_, err = broker.EnsureSessionStream(ctx(t), sib.JetStream(), "s1", sib.Storage())
	require.NoError(t, err)
	_, err = b.JetStream().Stream(ctx(t), broker.StreamName("s1"))
	require.NoError(t, err, "the same store")
	got := make(chan *nats.Msg, 1)
	sub, err := b.Conn().ChanSubscribe(broker.NodeIn("s1", "x"), got)
	require.NoError(t, err)
	defer func() { require.NoError(t, sub.Unsubscribe()) }()
	require.NoError(t, b.Conn().Flush())
	require.NoError(t, sib.Conn().Publish(broker.NodeIn("s1", "x"), []byte("hi")))
	require.Equal(t, "hi", string(recv(t, got, 10*time.Second, "message").Data))

	require.NoError(t, sib.Close())
	require.True(t, sib.Conn().IsClosed())
	require.True(t, b.Server().Running(), "the server runs on")
	ack, err := b.JetStream().Publish(ctx(t), broker.NodeIn("s1", "a"), []byte("x"))
	require.NoError(t, err, "the broker works on")
	require.Equal(t, broker.StreamName("s1"), ack.Stream)
}

// Close drains the connection while work holds it — what its
// subscriptions received is handled before it closes — and otherwise
// closes it without waiting for them (nats.go's drain polls, 20 ms at every
// command's exit).
func TestCloseDrainsOnlyWhileHeld(t *testing.T) {
	t.Run("held", func(t *testing.T) {
		b := brokertest.Start(t)
		release := b.Hold()
		defer release()
		handled, unblock := brokertest.BusySubscriber(t, b.Conn())
		closed := make(chan error, 1)
		go func() { closed <- b.Close() }()
		eventually(t, 10*time.Second, time.Millisecond, func() (bool, string) {
			return b.Conn().IsDraining() || b.Conn().IsClosed(), "Close has not begun"
		})
		require.True(t, b.Conn().IsDraining(), "Close drains the connection while it is held")
		close(unblock)
		require.NoError(t, recv(t, closed, 20*time.Second, "Close"))
		require.Equal(t, 2, handled(), "the message waiting at the subscription was handled before the connection closed")
	})
	t.Run("released", func(t *testing.T) {
		b := brokertest.Start(t)
		release := b.Hold()
		release()
		release() // more calls do nothing
		_, unblock := brokertest.BusySubscriber(t, b.Conn())
		defer close(unblock)
		closed := make(chan error, 1)
		go func() { closed <- b.Close() }()
		// A drain would wait for the blocked handler (up to 10 s).
		require.NoError(t, recv(t, closed, 5*time.Second, "Close while a handler is still busy"))
		require.True(t, b.Conn().IsClosed())
		require.False(t, b.Server().Running())
	})
}

// Unheard says a subject is unheard only when nothing on the embedded
// server listens to it: a stream's subjects are heard from its making,
// after a restart of the server too, until it is deleted; a client's
// wildcard makes everything heard; an external server hears everything.
func TestUnheardOnlyWhereNothingListens(t *testing.T) {
	cfg := broker.DefaultConfig()
	cfg.DataDir = t.TempDir()
	b, err := broker.Start(ctx(t), cfg)
	require.NoError(t, err)
	subj := "$KV." + broker.KVName("s1") + "." + broker.OwnerKey
	require.True(t, b.Unheard(subj), "no bucket yet")
	_, err = broker.SessionKV(ctx(t), b.JetStream(), "s1", broker.FileStorage)
	require.NoError(t, err)
	require.False(t, b.Unheard(subj), "its bucket's stream listens")
	require.NoError(t, b.Close())

	b, err = broker.Start(ctx(t), cfg)
	require.NoError(t, err)
	defer b.Close()
	require.False(t, b.Unheard(subj), "the stream recovered at the restart listens")
	require.NoError(t, b.JetStream().DeleteStream(ctx(t), "KV_"+broker.KVName("s1")))
	require.True(t, b.Unheard(subj), "deleted")

	nc, err := b.NewConn()
	require.NoError(t, err)
	sub, err := nc.SubscribeSync(">")
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	require.False(t, b.Unheard(subj), "a client's wildcard listens")
	require.NoError(t, sub.Unsubscribe())
	nc.Close()

	srv := external(t, t.TempDir(), "127.0.0.1:0")
	defer srv.Close()
	ext, err := broker.Start(ctx(t), broker.Config{URL: srv.ClientURL(), Token: "admin-tok"})
	require.NoError(t, err)
	defer ext.Close()
	require.False(t, ext.Unheard("nothing.listens.here"), "an external server cannot tell")
}
