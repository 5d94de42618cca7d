// Package brokertest starts a real embedded NATS server for tests: no TCP
// listener by default, JetStream in a temporary directory, logs to t.Log,
// closed by t.Cleanup. It is never skipped.
package brokertest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/switchyard/switchyard/broker"
)

// Option changes the test broker's configuration.
type Option func(*broker.Config)

// Listen opens a loopback listener on a random port with the given token
// for outside clients (and adminToken for operators, if not empty).
func Listen(token, adminToken string) Option {
	return func(c *broker.Config) {
		c.Listen = "127.0.0.1:0"
		c.Token = token
		c.AdminToken = adminToken
	}
}

// Configure applies f to the configuration.
func Configure(f func(*broker.Config)) Option { return func(c *broker.Config) { f(c) } }

// Start starts an embedded server for the test.
func Start(t testing.TB, opts ...Option) *broker.Broker {
	t.Helper()
	cfg := broker.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.ServerName = "test"
	cfg.Logger = slog.New(slog.NewTextHandler(tlogWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	for _, o := range opts {
		o(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := broker.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("brokertest: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Logf("brokertest: close: %v", err)
		}
	})
	return b
}

type tlogWriter struct{ t testing.TB }

func (w tlogWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}
