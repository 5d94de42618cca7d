package broker

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// adminUser is the runtime's own user on a listening embedded server.
const adminUser = "switchyard-runtime"

// Permissions of outside users: publish on inboxes and edges, read events.
var (
	outsidePublish   = []string{"sy.*.node.*.in", "sy.*.edge.>"}
	outsideSubscribe = []string{"sy.*.evt.>", "_INBOX.>"}
)

func startEmbedded(ctx context.Context, cfg Config) (*server.Server, error) {
	opts := &server.Options{
		ServerName: cfg.ServerName,
		JetStream:  true,
		StoreDir:   cfg.DataDir,
		NoSigs:     true,
		NoLog:      cfg.Logger == nil,
		MaxPayload: 8 << 20,
	}
	if cfg.Memory {
		opts.JetStreamMaxStore = 0
	}
	if cfg.Listen == "" {
		opts.DontListen = true
	} else {
		host, port, err := net.SplitHostPort(cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("broker: Listen: %w", err)
		}
		opts.Host = host
		if opts.Port, err = strconv.Atoi(port); err != nil {
			return nil, fmt.Errorf("broker: Listen port: %w", err)
		}
		if opts.Port == 0 {
			opts.Port = server.RANDOM_PORT
		}
		opts.CustomClientAuthentication = &auth{cfg: cfg}
		if cfg.TLSCert != "" {
			tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: cfg.TLSCert, KeyFile: cfg.TLSKey})
			if err != nil {
				return nil, fmt.Errorf("broker: TLS: %w", err)
			}
			tc.MinVersion = tls.VersionTLS12
			opts.TLSConfig = tc
			opts.TLS = true
		}
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("broker: embedded server: %w", err)
	}
	if cfg.Logger != nil {
		srv.SetLoggerV2(logger{cfg.Logger.With("component", "nats-server")}, false, false, false)
	} else {
		srv.SetLoggerV2(logger{slog.New(slog.DiscardHandler)}, false, false, false)
	}
	srv.Start()
	wait := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		wait = time.Until(dl)
	}
	if !srv.ReadyForConnections(wait) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, errors.New("broker: embedded server not ready for connections")
	}
	return srv, nil
}

// internalPassword is the runtime's own password, random per process.
func (b *Broker) internalPassword() string {
	if b.cfg.ServerName == "" {
		b.cfg.ServerName = "switchyard"
	}
	return runtimeSecret
}

var runtimeSecret = func() string {
	var k [16]byte
	_, _ = rand.Read(k[:])
	return hex.EncodeToString(k[:])
}()

// auth authenticates clients of a listening embedded server: the runtime
// itself and admin-token holders get every permission; outside users (the
// token or user/password of Config) may publish on inboxes and edges and
// read events only.
type auth struct{ cfg Config }

func eq(a, b string) bool { return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

func (a *auth) Check(c server.ClientAuthentication) bool {
	o := c.GetOpts()
	switch {
	case o.Username == adminUser && eq(o.Password, runtimeSecret):
		c.RegisterUser(&server.User{Username: adminUser})
	case eq(o.Token, a.cfg.AdminToken):
		c.RegisterUser(&server.User{Username: "admin"})
	case eq(o.Token, a.cfg.Token) || (a.cfg.User != "" && o.Username == a.cfg.User && eq(o.Password, a.cfg.Password)):
		c.RegisterUser(&server.User{Username: "outside", Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: outsidePublish},
			Subscribe: &server.SubjectPermission{Allow: outsideSubscribe},
		}})
	default:
		return false
	}
	return true
}
