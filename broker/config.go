package broker

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Config says which NATS to use. The zero URL means "start an embedded
// server".
type Config struct {
	// URL of an external server or cluster (comma-separated URLs); empty
	// starts the embedded server.
	URL string
	// DataDir is the embedded server's JetStream store (DefaultDataDir by
	// default). It may be empty only with Memory, and then a temporary
	// directory is used and removed by Close.
	DataDir string
	// Listen, when set ("127.0.0.1:4222", "127.0.0.1:0" for a random port),
	// opens a TCP listener on the embedded server. Credentials are then
	// required: Token, or User and Password.
	Listen string
	// Memory asks for JetStream memory storage: Broker.Storage reports
	// MemoryStorage, for the session resources of tests that want no disk.
	Memory bool
	// Token, User and Password are the credentials outside clients use when
	// Listen is set, and the credentials sent to an external server.
	Token    string
	User     string
	Password string
	// AdminToken, when set with Listen, is a credential with every
	// permission, for operators (switchyard stop, trigger, answer). It must
	// differ from Token.
	AdminToken string
	// WorkerToken, when set with Listen, is the credential of worker
	// processes (switchyard worker --token): the worker role (auth.go) may
	// pull and ack pool jobs, publish their outcomes and read the graphs
	// they refer to, and nothing else. It must differ from Token and
	// AdminToken.
	WorkerToken string
	// PoolTokens, when set with Listen, are the credentials of the workers
	// of one pool each (pool name -> token): the worker role narrowed to
	// that pool's jobs (auth.go) — a worker of pool "gpu" cannot pull,
	// acknowledge or answer a job of pool "cpu". WorkerToken stays the
	// credential of workers of any pool. Each must differ from every
	// other credential.
	PoolTokens map[string]string
	// TLSCert and TLSKey enable TLS on the listener.
	TLSCert string
	TLSKey  string
	// TLSCA is a PEM file of the CA that signed an external server's
	// certificate (URL with tls://), for a connection to it.
	TLSCA string
	// ServerName names the embedded server.
	ServerName string
	// MaxStore bounds the embedded server's JetStream file storage, in
	// bytes (0: the server's default, a share of the disk). A session that
	// reaches it stops with a clear error and a consistent checkpoint.
	MaxStore int64
	// DuplicateWindow is how long the sessions' work streams remember an
	// envelope's Nats-Msg-Id to drop a second publication of it (0:
	// DefaultDuplicateWindow; at least MinDuplicateWindow). It is also how
	// long what a session consumed stays in its work stream: the server
	// remembers the ids of what its stream holds across a restart, and
	// only those, so a trim keeps the window's messages (session's
	// journal trim). A client that retries a publish after an outage must
	// do so within it.
	DuplicateWindow time.Duration
	// MaxHeld bounds the envelopes each durable session on this broker
	// holds delivered and unacknowledged (its consumer's MaxAckPending; 0:
	// DefaultMaxHeld; at least MinMaxHeld): what its nodes were given and
	// have not consumed yet — queued behind their firings, waiting at a
	// gate or a join — each about a kilobyte of the process's memory. At
	// the bound the stream delivers nothing more to the session until
	// some are consumed: a backlog is taken in that many at a time, and a
	// node that keeps that many waiting (a manual gate nobody triggers)
	// holds up the session's other nodes.
	MaxHeld int
	// JournalKeep is how many journal records each durable session on
	// this broker keeps: its history and the checkpoints a fork may start
	// from (0: the session package's default, 4,096; at least
	// MinJournalKeep). Older records are compacted.
	JournalKeep int
	// Logger receives the embedded server's log; nil discards it.
	Logger *slog.Logger
}

// MinJournalKeep is the fewest journal records a session may keep.
const MinJournalKeep = 64

// DefaultDataDir is $XDG_STATE_HOME/switchyard, else ~/.local/state/switchyard.
func DefaultDataDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "switchyard")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "switchyard")
	}
	return filepath.Join(os.TempDir(), "switchyard")
}

// DefaultConfig is an embedded server on the default data directory, with
// no listener.
func DefaultConfig() Config {
	return Config{DataDir: DefaultDataDir(), ServerName: "switchyard"}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.DuplicateWindow != 0 && c.DuplicateWindow < MinDuplicateWindow {
		return fmt.Errorf("broker: duplicate window %s: at least %s (the server's minimum), or 0 for %s", c.DuplicateWindow, MinDuplicateWindow, DefaultDuplicateWindow)
	}
	if c.MaxHeld != 0 && c.MaxHeld < MinMaxHeld {
		return fmt.Errorf("broker: max held %d: at least %d, or 0 for %d", c.MaxHeld, MinMaxHeld, DefaultMaxHeld)
	}
	if c.JournalKeep != 0 && c.JournalKeep < MinJournalKeep {
		return fmt.Errorf("broker: journal keep %d: at least %d, or 0 for the default", c.JournalKeep, MinJournalKeep)
	}
	if c.URL != "" {
		if c.Listen != "" {
			return errors.New("broker: Listen applies to the embedded server, not to an external URL")
		}
		return nil
	}
	if c.DataDir == "" && !c.Memory {
		return errors.New("broker: DataDir is required for the embedded server (or Memory)")
	}
	if c.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Listen); err != nil {
			return fmt.Errorf("broker: Listen %q: %w", c.Listen, err)
		}
		if c.Token == "" && (c.User == "" || c.Password == "") {
			return errors.New("broker: a listening server requires credentials: a token, or a user and password")
		}
		if c.AdminToken != "" && c.AdminToken == c.Token {
			return errors.New("broker: the admin token must differ from the outside token")
		}
		if c.WorkerToken != "" && (c.WorkerToken == c.Token || c.WorkerToken == c.AdminToken) {
			return errors.New("broker: the worker token must differ from the outside and admin tokens")
		}
		seen := map[string]string{c.Token: "the outside token", c.AdminToken: "the admin token", c.WorkerToken: "the worker token"}
		for _, pool := range slices.Sorted(maps.Keys(c.PoolTokens)) {
			tok := c.PoolTokens[pool]
			if !ValidToken(pool) {
				return fmt.Errorf("broker: pool token of %q: not a pool name (letters, digits, '_' and '-')", pool)
			}
			if tok == "" {
				return fmt.Errorf("broker: pool %s: empty token", pool)
			}
			if other, dup := seen[tok]; dup {
				return fmt.Errorf("broker: the token of pool %s is %s too: each credential must differ", pool, other)
			}
			seen[tok] = "the token of pool " + pool
		}
		if (c.TLSCert == "") != (c.TLSKey == "") {
			return errors.New("broker: TLS needs both a certificate and a key")
		}
	}
	return nil
}
