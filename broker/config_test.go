package broker_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
)

func TestConfigValidate(t *testing.T) {
	base := broker.DefaultConfig()
	for _, tc := range []struct {
		name string
		edit func(*broker.Config)
		err  string
	}{
		{"default", func(*broker.Config) {}, ""},
		{"external", func(c *broker.Config) { c.URL = "nats://127.0.0.1:4222" }, ""},
		{"external with a listener", func(c *broker.Config) { c.URL, c.Listen, c.Token = "nats://x:4222", "127.0.0.1:0", "t" }, "Listen"},
		{"no store", func(c *broker.Config) { c.DataDir = "" }, "DataDir"},
		{"memory without store", func(c *broker.Config) { c.DataDir, c.Memory = "", true }, ""},
		{"a duplicate window below the server's minimum", func(c *broker.Config) { c.DuplicateWindow = 50 * time.Millisecond }, "at least 100ms"},
		{"a duplicate window", func(c *broker.Config) { c.DuplicateWindow = broker.MinDuplicateWindow }, ""},
		{"a bound on held envelopes below a node's room", func(c *broker.Config) { c.MaxHeld = 100 }, "max held 100: at least 1024"},
		{"a negative bound on held envelopes", func(c *broker.Config) { c.MaxHeld = -1 }, "at least 1024"},
		{"a bound on held envelopes", func(c *broker.Config) { c.MaxHeld = broker.MinMaxHeld }, ""},
		{"listen without credentials", func(c *broker.Config) { c.Listen = "127.0.0.1:0" }, "credentials"},
		{"listen with an admin token only", func(c *broker.Config) { c.Listen, c.AdminToken = "127.0.0.1:0", "a" }, "credentials"},
		{"listen with a user but no password", func(c *broker.Config) { c.Listen, c.User = "127.0.0.1:0", "u" }, "credentials"},
		{"listen with a token", func(c *broker.Config) { c.Listen, c.Token = "127.0.0.1:0", "t" }, ""},
		{"listen with a user", func(c *broker.Config) { c.Listen, c.User, c.Password = "127.0.0.1:0", "u", "p" }, ""},
		{"bad listen address", func(c *broker.Config) { c.Listen, c.Token = "4222", "t" }, "Listen"},
		{"admin token equal to token", func(c *broker.Config) { c.Listen, c.Token, c.AdminToken = ":0", "t", "t" }, "differ"},
		{"certificate without key", func(c *broker.Config) { c.Listen, c.Token, c.TLSCert = ":0", "t", "c.pem" }, "TLS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.edit(&c)
			err := c.Validate()
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.err)
			_, err = broker.Start(ctx(t), c)
			require.ErrorContains(t, err, tc.err, "Start validates")
		})
	}
}

func TestDefaultDataDir(t *testing.T) {
	t.Run("XDG_STATE_HOME", func(t *testing.T) {
		t.Setenv("XDG_STATE_HOME", "/state")
		require.Equal(t, filepath.Join("/state", "switchyard"), broker.DefaultDataDir())
		require.Equal(t, broker.DefaultDataDir(), broker.DefaultConfig().DataDir)
	})
	t.Run("home", func(t *testing.T) {
		t.Setenv("XDG_STATE_HOME", "")
		t.Setenv("HOME", "/home/u")
		require.Equal(t, filepath.Join("/home/u", ".local", "state", "switchyard"), broker.DefaultDataDir())
	})
	t.Run("no listener by default", func(t *testing.T) {
		require.Empty(t, broker.DefaultConfig().Listen)
		require.Empty(t, broker.DefaultConfig().URL)
	})
}
