package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/session"
)

// keepFinished records n completed durable sessions in the store in dir.
func keepFinished(t *testing.T, dir string, n int) {
	t.Helper()
	b := brokertest.Start(t, brokertest.Configure(func(c *broker.Config) { c.DataDir = dir }))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	g, diags := graph.Load("p.dot", []byte(`digraph p { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }`))
	require.False(t, diags.HasErrors())
	for i := range n {
		s, err := session.Start(ctx, session.Config{ID: "kept" + strconv.Itoa(i), Graph: g, Broker: b, Durable: true})
		require.NoError(t, err)
		rep, err := s.Wait(ctx)
		require.NoError(t, err)
		require.Equal(t, "success", rep.Status)
		s.Stop()
	}
	b.Close()
}

// serveStart starts serve FILE on the store in dir and returns how long it
// took to say it serves the file's session; serve is stopped.
func serveStart(t *testing.T, dir, file string) time.Duration {
	t.Helper()
	cmd := exec.Command(switchyardBinary(t), "serve", "--data", dir, "--logs", t.TempDir(), file)
	cmd.Dir = t.TempDir()
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "serving ") {
			took := time.Since(start)
			go func() { // drain until serve ends
				for sc.Scan() {
				}
			}()
			return took
		}
	}
	t.Fatal("serve never said it serves")
	return 0
}

// TestServeStartWithKeptSessions measures serve's start on a store that
// keeps finished sessions (SWITCHYARD_SERVE_START=N: N of them, against an
// empty store); the figure is in docs/sessions.md.
func TestServeStartWithKeptSessions(t *testing.T) {
	n, err := strconv.Atoi(os.Getenv("SWITCHYARD_SERVE_START"))
	if err != nil || n <= 0 {
		t.Skip("a measurement: SWITCHYARD_SERVE_START=200")
	}
	file := filepath.Join(t.TempDir(), "s.dot")
	require.NoError(t, os.WriteFile(file, []byte(`digraph s { kind="session"; a [prompt="a"] }`), 0o644))
	empty, kept := t.TempDir(), t.TempDir()
	keepFinished(t, kept, n)
	for round := range 3 {
		e, k := serveStart(t, empty, file), serveStart(t, kept, file)
		fmt.Printf("round %d: serve started in %v on an empty store, %v with %d finished sessions kept\n", round, e, k, n)
	}
}

// TestServeCollectsAtMostHourly: serve collects the store at start only
// when no run or serve collected it within the hour (the stamp in the data
// directory), as run does: with hundreds of kept sessions the scan was paid
// at every start. A session left running is adopted (--all) after the
// collection, which tells the test it is over.
func TestServeCollectsAtMostHourly(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(t.TempDir(), "s.dot")
	require.NoError(t, os.WriteFile(file, []byte(`digraph s { kind="session"; a [prompt="a"] }`), 0o644))
	store := func(f func(ctx context.Context, b *broker.Broker)) {
		t.Helper()
		b := brokertest.Start(t, brokertest.Configure(func(c *broker.Config) { c.DataDir = dir }))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		f(ctx, b)
		b.Close()
	}
	pipeline, diags := graph.Load("p.dot", []byte(`digraph p { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }`))
	require.False(t, diags.HasErrors())
	expired := func(ctx context.Context, b *broker.Broker, id string) {
		s, err := session.Start(ctx, session.Config{ID: id, Graph: pipeline, Broker: b, Durable: true,
			Clock: clock.NewFake(time.Now().Add(-8 * 24 * time.Hour))})
		require.NoError(t, err)
		rep, err := s.Wait(ctx)
		require.NoError(t, err)
		require.Equal(t, "success", rep.Status)
	}
	left := func(ctx context.Context, b *broker.Broker, id string) {
		g, diags := graph.Load(file, []byte(`digraph s { kind="session"; a [prompt="a"] }`), graph.AsSession())
		require.False(t, diags.HasErrors())
		s, err := session.Start(ctx, session.Config{ID: id, Graph: g, Broker: b, Durable: true})
		require.NoError(t, err)
		s.Stop() // interrupted: running, for a serve --all to adopt
	}
	kept := func(id string) (ok bool) {
		store(func(ctx context.Context, b *broker.Broker) {
			_, err := session.ReadMeta(ctx, b, id)
			ok = err == nil
		})
		return ok
	}
	serveAll := func(adopt string) string {
		t.Helper()
		cmd := exec.Command(switchyardBinary(t), "serve", "--data", dir, "--logs", t.TempDir(), "--all", file)
		cmd.Dir = t.TempDir()
		stderr, err := cmd.StderrPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		var said strings.Builder
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			said.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "resumed session "+adopt) {
				break
			}
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		for sc.Scan() {
		}
		_ = cmd.Wait()
		require.Contains(t, said.String(), "resumed session "+adopt, "serve said: %s", said.String())
		return said.String()
	}

	store(func(ctx context.Context, b *broker.Broker) { expired(ctx, b, "old1"); left(ctx, b, "live1") })
	said := serveAll("live1")
	require.Contains(t, said, "removed session old1", "never collected: collected at start")
	require.False(t, kept("old1"))
	_, err := os.Stat(filepath.Join(dir, gcStampFile))
	require.NoError(t, err, "stamped")

	store(func(ctx context.Context, b *broker.Broker) { expired(ctx, b, "old2"); left(ctx, b, "live2") })
	said = serveAll("live2")
	require.NotContains(t, said, "removed session")
	require.True(t, kept("old2"), "collected less than an hour ago: not scanned again")
}
