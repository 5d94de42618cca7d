package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/session"
)

// TestCollectDue: run collects an embedded store at most once an hour (or
// once per --retain, when shorter), which the stamp file in its data
// directory records: a store keeping a week of sessions does not make every
// run read them all.
func TestCollectDue(t *testing.T) {
	dir := t.TempDir()
	b := brokertest.Start(t, brokertest.Configure(func(c *broker.Config) { c.DataDir = dir }))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g, diags := graph.Load("p.dot", []byte(`digraph p { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }`))
	require.False(t, diags.HasErrors())
	old := func(id string) {
		t.Helper()
		fake := clock.NewFake(time.Now().Add(-8 * 24 * time.Hour))
		s, err := session.Start(ctx, session.Config{ID: id, Graph: g, Broker: b, Durable: true, Clock: fake})
		require.NoError(t, err)
		rep, err := s.Wait(ctx)
		require.NoError(t, err)
		require.Equal(t, "success", rep.Status)
	}
	kept := func(id string) bool {
		_, err := session.ReadMeta(ctx, b, id)
		return err == nil
	}
	week := 7 * 24 * time.Hour
	stamp := filepath.Join(dir, gcStampFile)

	old("a")
	var out bytes.Buffer
	collectDue(ctx, b, week, &out)
	require.False(t, kept("a"), "no stamp yet: collected")
	require.Contains(t, out.String(), "removed session a")
	_, err := os.Stat(stamp)
	require.NoError(t, err, "stamped")

	old("b")
	collectDue(ctx, b, week, &out)
	require.True(t, kept("b"), "collected less than an hour ago")
	collectDue(ctx, b, time.Minute, &out)
	require.True(t, kept("b"), "collected less than --retain ago")

	hourAgo := time.Now().Add(-time.Hour - time.Minute)
	require.NoError(t, os.Chtimes(stamp, hourAgo, hourAgo))
	collectDue(ctx, b, week, &out)
	require.False(t, kept("b"), "the last collection was more than an hour ago")

	old("c")
	collectDue(ctx, b, 0, &out)
	require.True(t, kept("c"), "--retain 0 keeps everything")
}
