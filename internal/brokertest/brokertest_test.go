package brokertest_test

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/internal/brokertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStartDefaults(t *testing.T) {
	var b *broker.Broker
	t.Run("inner", func(t *testing.T) {
		b = brokertest.Start(t)
		require.True(t, b.Embedded())
		require.Empty(t, b.ClientURL(), "no listener by default")
		require.Equal(t, broker.FileStorage, b.Storage())
		dir := b.Server().JetStreamConfig().StoreDir
		tmp := filepath.Dir(t.TempDir()) // the test's own temporary root
		require.True(t, strings.HasPrefix(dir, tmp), "store %s under %s", dir, tmp)
		require.NoError(t, b.Conn().Publish("sy.s1.node.a.in", []byte("x")))
	})
	require.True(t, b.Conn().IsClosed(), "closed by the test's cleanup")
	require.False(t, b.Server().Running())
}

func TestOptions(t *testing.T) {
	t.Run("listen", func(t *testing.T) {
		b := brokertest.Start(t, brokertest.Listen("tok", "admin"))
		require.True(t, strings.HasPrefix(b.ClientURL(), "nats://127.0.0.1:"), b.ClientURL())
		nc, err := nats.Connect(b.ClientURL(), nats.Token("tok"))
		require.NoError(t, err)
		nc.Close()
		_, err = nats.Connect(b.ClientURL())
		require.Error(t, err)
	})
	t.Run("memory", func(t *testing.T) {
		require.Equal(t, broker.MemoryStorage, brokertest.Start(t, brokertest.Memory()).Storage())
	})
	t.Run("configure and log level", func(t *testing.T) {
		var mu sync.Mutex
		var buf bytes.Buffer
		w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return buf.Write(p) })
		b := brokertest.Start(t, brokertest.Configure(func(c *broker.Config) {
			c.ServerName = "named"
			c.Logger = slog.New(slog.NewTextHandler(w, nil))
		}))
		require.Equal(t, "named", b.Server().Name())
		require.NoError(t, b.Close())
		mu.Lock()
		defer mu.Unlock()
		require.Contains(t, buf.String(), "Server is ready")
	})
	t.Run("log level reaches t.Log", func(t *testing.T) {
		rec := &recorder{TB: t}
		brokertest.Start(rec, brokertest.LogLevel(slog.LevelInfo))
		require.True(t, rec.contains("Server is ready"), "the server logs before it is ready")
		require.False(t, rec.contains("level=DEBUG"))
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// recorder is a testing.TB that also keeps what is logged.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	logs []string
}

func (r *recorder) Log(args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range args {
		if s, ok := a.(string); ok {
			r.logs = append(r.logs, s)
		}
	}
	r.TB.Log(args...)
}

func (r *recorder) contains(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.logs {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}
