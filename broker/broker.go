package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Broker is a connection to NATS, and the embedded server when there is one.
type Broker struct {
	cfg  Config
	srv  *server.Server // nil when external
	nc   *nats.Conn
	js   jetstream.JetStream
	once sync.Once
	err  error
	// closed is closed when nc has finished closing (after Drain).
	closed chan struct{}
}

// Start starts the embedded server (cfg.URL empty) or connects to cfg.URL.
func Start(ctx context.Context, cfg Config) (*Broker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b := &Broker{cfg: cfg, closed: make(chan struct{})}
	if cfg.URL == "" {
		srv, err := startEmbedded(ctx, cfg)
		if err != nil {
			return nil, err
		}
		b.srv = srv
	}
	nc, err := b.NewConn(nats.Name("switchyard"), nats.ClosedHandler(func(*nats.Conn) { close(b.closed) }))
	if err != nil {
		b.shutdownServer()
		return nil, err
	}
	b.nc = nc
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		b.shutdownServer()
		return nil, fmt.Errorf("broker: jetstream: %w", err)
	}
	b.js = js
	return b, nil
}

// NewConn opens another connection: in-process to the embedded server
// (always with every permission), or by URL to the external one with the
// configured credentials, reconnecting forever and buffering publishes
// while the server is away.
func (b *Broker) NewConn(opts ...nats.Option) (*nats.Conn, error) {
	if b.srv != nil {
		all := append([]nats.Option{nats.InProcessServer(b.srv)}, b.adminAuth()...)
		nc, err := nats.Connect("", append(all, opts...)...)
		if err != nil {
			return nil, fmt.Errorf("broker: connect in-process: %w", err)
		}
		return nc, nil
	}
	all := []nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectBufSize(64 << 20), nats.RetryOnFailedConnect(false)}
	switch {
	case b.cfg.Token != "":
		all = append(all, nats.Token(b.cfg.Token))
	case b.cfg.User != "":
		all = append(all, nats.UserInfo(b.cfg.User, b.cfg.Password))
	}
	nc, err := nats.Connect(b.cfg.URL, append(all, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("broker: connect %s: %w", b.cfg.URL, err)
	}
	return nc, nil
}

// adminAuth is the credential of the runtime's own connections to a
// listening embedded server.
func (b *Broker) adminAuth() []nats.Option {
	if b.cfg.Listen == "" {
		return nil
	}
	return []nats.Option{nats.UserInfo(adminUser, b.internalPassword())}
}

// Conn is the broker's connection.
func (b *Broker) Conn() *nats.Conn { return b.nc }

// JetStream is the JetStream context of the broker's connection.
func (b *Broker) JetStream() jetstream.JetStream { return b.js }

// Server is the embedded server, or nil.
func (b *Broker) Server() *server.Server { return b.srv }

// Embedded reports whether the broker runs its own server.
func (b *Broker) Embedded() bool { return b.srv != nil }

// ClientURL is the URL outside clients use: the listener of the embedded
// server ("" when it has none), or the external URL.
func (b *Broker) ClientURL() string {
	if b.srv == nil {
		return b.cfg.URL
	}
	if b.cfg.Listen == "" {
		return ""
	}
	addr := b.srv.Addr()
	if addr == nil {
		return ""
	}
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return ""
	}
	scheme := "nats"
	if b.cfg.TLSCert != "" {
		scheme = "tls"
	}
	return scheme + "://" + net.JoinHostPort(tcp.IP.String(), strconv.Itoa(tcp.Port))
}

// Close drains the connection and shuts the embedded server down, waiting
// for it. It is idempotent and returns the first error.
func (b *Broker) Close() error {
	b.once.Do(func() {
		if b.nc != nil {
			if err := b.nc.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
				b.err = err
			}
			select { // Drain is asynchronous
			case <-b.closed:
			case <-time.After(10 * time.Second):
			}
			b.nc.Close()
		}
		b.shutdownServer()
	})
	return b.err
}

func (b *Broker) shutdownServer() {
	if b.srv != nil {
		b.srv.Shutdown()
		b.srv.WaitForShutdown()
	}
}

// logger adapts nats-server's logging onto slog.
type logger struct{ l *slog.Logger }

func (l logger) Noticef(format string, v ...any) { l.l.Info(fmt.Sprintf(format, v...)) }
func (l logger) Warnf(format string, v ...any)   { l.l.Warn(fmt.Sprintf(format, v...)) }
func (l logger) Fatalf(format string, v ...any)  { l.l.Error(fmt.Sprintf(format, v...)) }
func (l logger) Errorf(format string, v ...any)  { l.l.Error(fmt.Sprintf(format, v...)) }
func (l logger) Debugf(format string, v ...any)  { l.l.Debug(fmt.Sprintf(format, v...)) }
func (l logger) Tracef(format string, v ...any)  { l.l.Debug(fmt.Sprintf(format, v...)) }
