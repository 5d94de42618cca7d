package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// defaultReadyWait bounds the wait for the embedded server when ctx has no
// deadline.
const defaultReadyWait = 10 * time.Second

// maxPayload is the embedded server's largest message: envelopes stay far
// below it; artifacts go to the object store, which chunks them.
const maxPayload = 8 << 20

// serverOptions builds the embedded server's options: JetStream on storeDir,
// no signal handling (the CLI owns signals), no TCP listener unless
// cfg.Listen asks for one, in which case every client authenticates, and
// no subscription-list cache.
//
// The account's subscription-list cache (up to 1,024 subjects published
// on, with their subscribers) is walked in full at every wildcard
// subscription made or removed, each subject matched against it. A
// session makes and removes two (its inboxes' and its edges': the intake
// of a durable session, the dispatch of one that is not) and publishes on
// subjects of its own (its journal's keys), so the cache is always full
// of subjects no one publishes on again: those walks were 4% of the CPU
// of a durable 10-node pipeline's Run, on the server's reading of the
// session's connection, ahead of what the session sent after them. Without it a publish matches the subscription tree
// (a client keeps its own cache of recent results); measured in the same
// process: a durable 10-node Run 10% less wall time, a named one 7%,
// ingest unchanged or better (docs/performance-log.md, seventeenth round).
func serverOptions(cfg Config, storeDir, secret string) (*server.Options, error) {
	opts := &server.Options{
		ServerName:     cfg.ServerName,
		JetStream:      true,
		StoreDir:       storeDir,
		NoSigs:         true,
		NoLog:          cfg.Logger == nil,
		MaxPayload:     maxPayload,
		NoSublistCache: true,
	}
	if cfg.MaxStore > 0 {
		opts.JetStreamMaxStore = cfg.MaxStore
	}
	if cfg.Listen == "" {
		opts.DontListen = true
		return opts, nil
	}
	host, port, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("broker: Listen %q: %w", cfg.Listen, err)
	}
	opts.Host = host
	if opts.Port, err = strconv.Atoi(port); err != nil {
		return nil, fmt.Errorf("broker: Listen port %q: %w", port, err)
	}
	if opts.Port == 0 {
		opts.Port = server.RANDOM_PORT
	}
	opts.CustomClientAuthentication = &auth{cfg: cfg, secret: secret}
	if cfg.TLSCert != "" {
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: cfg.TLSCert, KeyFile: cfg.TLSKey})
		if err != nil {
			return nil, fmt.Errorf("broker: TLS: %w", err)
		}
		tc.MinVersion = tls.VersionTLS12
		opts.TLSConfig = tc
		opts.TLS = true
	}
	return opts, nil
}

// startEmbedded starts the server and waits until it accepts connections
// (JetStream included), for as long as ctx allows.
func startEmbedded(ctx context.Context, cfg Config, storeDir, secret string) (*server.Server, error) {
	opts, err := serverOptions(cfg, storeDir, secret)
	if err != nil {
		return nil, err
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("broker: embedded server: %w", err)
	}
	l := cfg.Logger
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	log := serverLog{l: l.With("component", "nats-server"), fatal: make(chan string, 1)}
	srv.SetLoggerV2(log, false, false, false)
	srv.Start()
	deadline := time.Now().Add(defaultReadyWait)
	if dl, ok := ctx.Deadline(); ok {
		deadline = dl
	}
	if err := waitReady(ctx, srv, log.fatal, deadline); err != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, err
	}
	return srv, nil
}

// readyPoll is how long one ReadyForConnections call waits before the
// server's fatal messages and ctx are looked at again.
const readyPoll = 25 * time.Millisecond

// waitReady waits until srv accepts connections, the server reports a fatal
// error (a listener it cannot open), ctx ends or the deadline passes.
func waitReady(ctx context.Context, srv *server.Server, fatal <-chan string, deadline time.Time) error {
	for {
		if srv.ReadyForConnections(readyPoll) {
			return nil
		}
		select {
		case msg := <-fatal:
			return fmt.Errorf("broker: embedded server: %s", msg)
		case <-ctx.Done():
			return fmt.Errorf("broker: embedded server not ready: %w", ctx.Err())
		default:
		}
		if time.Now().After(deadline) {
			return errors.New("broker: embedded server not ready for connections")
		}
	}
}
