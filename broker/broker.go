package broker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Reconnection of connections to an external server: forever, buffering
// what is published while the server is away, so a restart is ridden through.
const (
	reconnectWait    = 250 * time.Millisecond
	reconnectBufSize = 64 << 20
	// drainWait bounds Close's wait for the drain (or the flush) of the
	// connection.
	drainWait = 10 * time.Second
)

// Broker is the runtime's NATS: a connection, its JetStream context, and
// the embedded server when there is one. Its methods are safe for
// concurrent use. Close releases everything.
type Broker struct {
	cfg    Config
	srv    *server.Server // nil when external
	secret string         // the runtime's password on a listening embedded server
	tmpDir string         // the store of a Memory broker without DataDir, removed by Close
	lock   *os.File       // the data directory's lock, held while the embedded server runs
	nc     *nats.Conn
	js     jetstream.JetStream
	closed chan struct{} // closed when nc has closed (the end of Drain)

	// leases is the lease bucket as Leases last found it, with how many
	// replicas it was asked for (Broker.Leases).
	leases struct {
		mu       sync.Mutex
		kv       jetstream.KeyValue
		replicas int
	}

	// archive is the archive bucket's stream as Archived last found it
	// (Broker.Archived); nil when it was not found.
	archive struct {
		mu     sync.Mutex
		stream jetstream.Stream
	}

	// onClose is what Close runs first, last registered first (OnClose).
	onClose struct {
		mu     sync.Mutex
		fs     []func()
		closed bool
	}

	// sibling: made by Sibling, on another broker's server, which it
	// does not own.
	sibling bool

	// holds counts the work running on the connection that Close drains
	// it for (Hold).
	holds atomic.Int64

	once sync.Once
	err  error
}

// OnClose registers f to run when Close is called, before the connection
// drains: what a package keeps per broker (the session package's prepared
// stores) is let go of while the broker still works. The functions run
// last registered first. It returns false, and does not register f, once
// Close has begun.
func (b *Broker) OnClose(f func()) bool {
	b.onClose.mu.Lock()
	defer b.onClose.mu.Unlock()
	if b.onClose.closed {
		return false
	}
	b.onClose.fs = append(b.onClose.fs, f)
	return true
}

// Start starts the embedded server (cfg.URL empty) or connects to the
// external one at cfg.URL, then opens the broker's connection. It waits for
// the embedded server for as long as ctx allows (10s when ctx has no
// deadline).
func Start(ctx context.Context, cfg Config) (*Broker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	b := &Broker{cfg: cfg, closed: make(chan struct{})}
	if cfg.URL == "" {
		storeDir := cfg.DataDir
		if storeDir == "" { // Memory, checked by Validate
			dir, err := os.MkdirTemp("", "switchyard-js-")
			if err != nil {
				return nil, fmt.Errorf("broker: store: %w", err)
			}
			b.tmpDir, storeDir = dir, dir
		}
		lock, err := lockDir(storeDir)
		if err != nil {
			b.removeTmp()
			return nil, err
		}
		b.lock = lock
		if cfg.Listen != "" {
			b.secret = newSecret()
		}
		srv, err := startEmbedded(ctx, cfg, storeDir, b.secret)
		if err != nil {
			unlock(b.lock)
			b.removeTmp()
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

// NewConn opens another connection: in-process to the embedded server, as
// admin (every permission), or by URL to the external server with the
// configured credentials, reconnecting forever and buffering publishes
// while the server is away. Its replies arrive under RuntimeInboxPrefix. opts come last and so override these. The
// caller closes the connection.
func (b *Broker) NewConn(opts ...nats.Option) (*nats.Conn, error) {
	if b.srv != nil {
		all := []nats.Option{nats.InProcessServer(b.srv), nats.CustomInboxPrefix(RuntimeInboxPrefix)}
		if b.secret != "" {
			all = append(all, nats.UserInfo(adminUser, b.secret))
		}
		nc, err := nats.Connect("", append(all, opts...)...)
		if err != nil {
			return nil, fmt.Errorf("broker: connect in-process: %w", err)
		}
		return nc, nil
	}
	all := []nats.Option{
		nats.CustomInboxPrefix(RuntimeInboxPrefix),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(reconnectWait),
		nats.ReconnectBufSize(reconnectBufSize),
	}
	switch {
	case b.cfg.Token != "":
		all = append(all, nats.Token(b.cfg.Token))
	case b.cfg.User != "":
		all = append(all, nats.UserInfo(b.cfg.User, b.cfg.Password))
	}
	if b.cfg.TLSCA != "" {
		all = append(all, nats.RootCAs(b.cfg.TLSCA))
	}
	nc, err := nats.Connect(b.cfg.URL, append(all, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("broker: connect %s: %w", b.cfg.URL, err)
	}
	return nc, nil
}

// Sibling is a broker on b's server and store with a connection of its
// own. A server reads each connection's messages one after the other: the
// requests of background work (the session package's prepared stores and
// removals: stream creations and deletions, the server's file-system
// calls) sent on a sibling's connection no longer hold up, on the
// server's side, the journal writes b's connection carries. Its Close
// drains its own connection only (and runs its OnClose functions); close
// it before b.
func (b *Broker) Sibling() (*Broker, error) {
	s := &Broker{cfg: b.cfg, srv: b.srv, secret: b.secret, tmpDir: b.tmpDir, closed: make(chan struct{}), sibling: true}
	nc, err := b.NewConn(nats.Name("switchyard-background"), nats.ClosedHandler(func(*nats.Conn) { close(s.closed) }))
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("broker: jetstream: %w", err)
	}
	s.nc, s.js = nc, js
	return s, nil
}

// Conn is the broker's connection (admin on an embedded server). Do not
// close it; Close does.
func (b *Broker) Conn() *nats.Conn { return b.nc }

// Leases is the package's Leases for this broker's store, remembered once
// found: a session's start looked the bucket up every time (a round trip
// to make no change). A bucket asked for with more replicas than it was
// last is looked up again. cached says the handle was remembered: a caller
// whose request through it fails calls ForgetLeases and asks again (the
// bucket was removed, by an operator or a test).
func (b *Broker) Leases(ctx context.Context, replicas int) (kv jetstream.KeyValue, cached bool, err error) {
	b.leases.mu.Lock()
	defer b.leases.mu.Unlock()
	if b.leases.kv != nil && replicas <= b.leases.replicas {
		return b.leases.kv, true, nil
	}
	kv, err = Leases(ctx, b.js, b.Storage(), Replicas(replicas))
	if err != nil {
		return nil, false, err
	}
	b.leases.kv, b.leases.replicas = kv, max(replicas, b.leases.replicas, 1)
	return kv, false, nil
}

// ForgetLeases makes the next Leases look the lease bucket up again.
func (b *Broker) ForgetLeases() {
	b.leases.mu.Lock()
	b.leases.kv, b.leases.replicas = nil, 0
	b.leases.mu.Unlock()
}

// Archived reports whether the archive holds session (the package
// function Archived), through the archive's stream as this broker last
// found it: a store that has an archive answers in one request, not two
// (the stream's lookup, then its last mark of the session). Each answer
// is the server's at the time of the request — a session archived since,
// by this process or another, is seen. A stream not found is looked up
// again at each call (it is made by the first archiving); a request that
// fails through the handle (the stream deleted, an operator's `gc` or a
// test) looks the stream up again.
func (b *Broker) Archived(ctx context.Context, session string) (bool, error) {
	s, none := b.knownArchive(session)
	if none {
		return false, nil // no archive on this server: nothing asked
	}
	if s != nil {
		archived, err := archivedIn(ctx, s, session)
		if err == nil {
			return archived, nil
		}
		b.archive.mu.Lock()
		if b.archive.stream == s {
			b.archive.stream = nil
		}
		b.archive.mu.Unlock()
	}
	s, err := archiveStream(ctx, b.js)
	if s == nil || err != nil {
		return false, err
	}
	b.archive.mu.Lock()
	b.archive.stream = s
	b.archive.mu.Unlock()
	return archivedIn(ctx, s, session)
}

// MayHaveArchived is false when Archived(session) would be false without
// asking the server: this server has no archive (and none was found
// before).
func (b *Broker) MayHaveArchived(session string) bool {
	_, none := b.knownArchive(session)
	return !none
}

// knownArchive is the archive's stream as this broker last found it (nil:
// not found yet), and none when it is nil and no stream on this server
// takes session's archived mark: the server has no archive.
func (b *Broker) knownArchive(session string) (s jetstream.Stream, none bool) {
	b.archive.mu.Lock()
	s = b.archive.stream
	b.archive.mu.Unlock()
	return s, s == nil && b.Unheard("$KV."+ArchiveName+"."+archivedMark(session))
}

// JetStream is the JetStream context of the broker's connection.
func (b *Broker) JetStream() jetstream.JetStream { return b.js }

// Server is the embedded server, or nil when the broker is external.
func (b *Broker) Server() *server.Server { return b.srv }

// DataDir is the embedded server's store directory (a temporary one for a
// Memory broker without Config.DataDir), "" when the broker is external.
func (b *Broker) DataDir() string {
	if b.srv == nil {
		return ""
	}
	if b.tmpDir != "" {
		return b.tmpDir
	}
	return b.cfg.DataDir
}

// Embedded reports whether the broker runs its own server.
func (b *Broker) Embedded() bool { return b.srv != nil }

// Storage is where session resources belong on this broker: MemoryStorage
// when Config.Memory is set, FileStorage otherwise.
func (b *Broker) Storage() Storage {
	if b.cfg.Memory {
		return MemoryStorage
	}
	return FileStorage
}

// ClientURL is the URL outside clients connect to: the embedded server's
// listener ("nats://host:port", "tls://…" with TLS), "" when the embedded
// server does not listen, or the external server's URL.
func (b *Broker) ClientURL() string {
	if b.srv == nil {
		return b.cfg.URL
	}
	if b.cfg.Listen == "" {
		return ""
	}
	tcp, ok := b.srv.Addr().(*net.TCPAddr)
	if !ok {
		return ""
	}
	scheme := "nats"
	if b.cfg.TLSCert != "" {
		scheme = "tls"
	}
	return scheme + "://" + net.JoinHostPort(tcp.IP.String(), strconv.Itoa(tcp.Port))
}

// Hold tells the broker that work runs on its connection — a session,
// from its start until it has stopped — until release is called (more
// calls do nothing). Close drains the connection while a hold is held.
func (b *Broker) Hold() (release func()) {
	b.holds.Add(1)
	var once sync.Once
	return func() { once.Do(func() { b.holds.Add(-1) }) }
}

// Close runs what OnClose registered, lets go of the broker's connection
// (waiting up to 10s) and then shuts the embedded server down and waits
// for it. Connections opened with NewConn are the caller's. Close is
// idempotent; every call returns the first call's error.
//
// While work holds the connection (Hold: a session still running on it),
// Close drains it, so that the work finishes what its subscriptions
// received. Otherwise it flushes what was published and closes it: nats.go's
// drain polls every 10 ms, twice, for the connection's subscriptions and
// then its request multiplexer to finish, which cost every command about
// 20 ms at exit (a quarter of `run hello.dot`) with nothing left to drain.
// What must be kept is published through JetStream and its acknowledgement
// awaited (as the runtime does): a core NATS publish that a stream
// captures is stored by the server after the flush.
func (b *Broker) Close() error {
	b.once.Do(func() {
		b.onClose.mu.Lock()
		fs := b.onClose.fs
		b.onClose.fs, b.onClose.closed = nil, true
		b.onClose.mu.Unlock()
		for i := len(fs) - 1; i >= 0; i-- {
			fs[i]()
		}
		switch {
		case b.nc == nil:
		case b.holds.Load() == 0:
			b.closeIdle()
		default:
			err := b.nc.Drain()
			switch {
			case err == nil:
				select { // Drain is asynchronous; the closed handler ends it
				case <-b.closed:
				case <-time.After(drainWait):
					b.err = errors.New("broker: drain timed out")
				}
			case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrConnectionReconnecting):
				// Nothing to drain: closed already, or the server is away
				// (Drain then closes the connection itself).
			default:
				b.err = fmt.Errorf("broker: drain: %w", err)
			}
			b.nc.Close()
		}
		if !b.sibling {
			b.shutdownServer()
		}
	})
	return b.err
}

// closeIdle flushes the connection and closes it (Close with no hold).
// Nothing is flushed while the server is away: what was buffered for it is
// lost with the connection, as a drain would lose it.
func (b *Broker) closeIdle() {
	if !b.nc.IsReconnecting() && !b.nc.IsClosed() {
		if err := b.nc.FlushTimeout(drainWait); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			b.err = fmt.Errorf("broker: flush: %w", err)
		}
	}
	b.nc.Close()
}

// shutdownServer stops the embedded server, waits for it, and removes a
// temporary store.
func (b *Broker) shutdownServer() {
	if b.srv != nil {
		b.srv.Shutdown()
		b.srv.WaitForShutdown()
	}
	unlock(b.lock)
	b.lock = nil
	b.removeTmp()
}

func (b *Broker) removeTmp() {
	if b.tmpDir != "" {
		_ = os.RemoveAll(b.tmpDir)
	}
}

// Interest reports whether anyone subscribes to subject. Only an embedded
// server can tell cheaply; on an external server the answer is always true.
// The runtime skips publishing events nobody listens to (the session sees
// its own events in process).
func (b *Broker) Interest(subject string) bool {
	if b.srv == nil {
		return true
	}
	acc := b.srv.GlobalAccount()
	if acc == nil {
		return true
	}
	return acc.SubscriptionInterest(subject)
}

// Unheard reports that nothing on the broker's server listens to subject:
// no subscription and no stream (a stream subscribes to its subjects in
// the server). Only an embedded server, which is alone, can tell, and
// without a request: on an external one, and whenever anything listens
// (a stream, or a client's wildcard), it is false. A lookup of a stream
// that Unheard shows absent is skipped: a stream info request is a JSON
// round trip through the server's API, ~0.1 ms of CPU on both sides.
func (b *Broker) Unheard(subject string) bool {
	if b.srv == nil {
		return false
	}
	// The broker's clients are in the server's global account, and so are
	// its streams: where they are not (JetStream off there), nothing is
	// claimed.
	acc := b.srv.GlobalAccount()
	return acc != nil && acc.JetStreamEnabled() && !acc.SubscriptionInterest(subject)
}

// DuplicateWindow is the duplicate window of the sessions' work streams
// on this broker: Config.DuplicateWindow, or DefaultDuplicateWindow.
func (b *Broker) DuplicateWindow() time.Duration {
	return cmp.Or(b.cfg.DuplicateWindow, DefaultDuplicateWindow)
}

// MaxHeld is how many envelopes a durable session on this broker holds
// delivered and unacknowledged at most: Config.MaxHeld, or DefaultMaxHeld.
func (b *Broker) MaxHeld() int {
	return cmp.Or(b.cfg.MaxHeld, DefaultMaxHeld)
}

// JournalKeep is how many journal records a durable session on this
// broker keeps: Config.JournalKeep, or 0 for the session package's
// default.
func (b *Broker) JournalKeep() int { return b.cfg.JournalKeep }
