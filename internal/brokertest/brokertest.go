// Package brokertest starts a real embedded NATS server for tests: no TCP
// listener by default, JetStream in t.TempDir(), the server's warnings and
// errors logged with t.Log, t.Fatal on failure, closed by t.Cleanup. It is
// never skipped: the server runs in the test's own process.
package brokertest

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/broker"
)

// startTimeout bounds the start of the test server.
const startTimeout = 30 * time.Second

// settings is what the options change.
type settings struct {
	cfg   broker.Config
	level slog.Level
}

// Option changes the test broker's settings.
type Option func(*settings)

// Listen opens a listener on a random loopback port, with token as the
// outside users' credential and adminToken (if not empty) as the admins'.
// Broker.ClientURL is then its URL.
func Listen(token, adminToken string) Option {
	return func(s *settings) {
		s.cfg.Listen = "127.0.0.1:0"
		s.cfg.Token = token
		s.cfg.AdminToken = adminToken
	}
}

// Memory makes Broker.Storage report MemoryStorage, for tests that want
// session resources in memory.
func Memory() Option { return func(s *settings) { s.cfg.Memory = true } }

// LogLevel is the least level of the server's log that reaches t.Log
// (default slog.LevelWarn).
func LogLevel(level slog.Level) Option { return func(s *settings) { s.level = level } }

// Configure applies f to the broker configuration, for anything else. A
// Logger it sets replaces the t.Log one.
func Configure(f func(*broker.Config)) Option { return func(s *settings) { f(&s.cfg) } }

// Start starts an embedded server for the test and closes it when the test
// ends (an error closing it fails the test). It calls t.Fatal if the server
// does not start.
func Start(t testing.TB, opts ...Option) *broker.Broker {
	t.Helper()
	s := settings{cfg: broker.DefaultConfig(), level: slog.LevelWarn}
	s.cfg.DataDir = t.TempDir()
	s.cfg.ServerName = "test"
	for _, o := range opts {
		o(&s)
	}
	if s.cfg.Logger == nil {
		s.cfg.Logger = Logger(t, s.level)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	b, err := broker.Start(ctx, s.cfg)
	if err != nil {
		t.Fatalf("brokertest: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("brokertest: close: %v", err)
		}
	})
	return b
}

// Logger is a logger writing each record at level or above with t.Log:
// what a component under test says shows beside the test's failure.
func Logger(t testing.TB, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(tlogWriter{t}, &slog.HandlerOptions{Level: level}))
}

// tlogWriter writes each log line with t.Log.
type tlogWriter struct{ t testing.TB }

func (w tlogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
