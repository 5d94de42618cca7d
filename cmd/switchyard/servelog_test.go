package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// TestLiveLogShowsEveryLimit: serve's default output has a line for every
// limit a node can hit and every refusal on the way in.
func TestLiveLogShowsEveryLimit(t *testing.T) {
	at := timestamppb.New(time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC))
	var out syncBuffer
	log := &serveLog{w: &out}
	for _, kind := range []string{"iterations.exceeded", "iterations.waiting", "budget.threshold", "budget.exceeded",
		"stall.detected", "node.refused", "envelope.rejected", "human.answer.refused"} {
		log.render(&pb.Event{Kind: kind, SessionId: "s1", Node: "a", Message: "because " + kind + "\nmore", Time: at})
		require.Contains(t, out.String(), "2026-11-23 09:00:00 s1  a", kind)
		require.Contains(t, out.String(), "because "+kind+"\n", "the first line of the reason")
	}
	before := out.String()
	log.render(&pb.Event{Kind: "checkpoint.saved", SessionId: "s1", Node: "a", Time: at})
	require.Equal(t, before, out.String(), "bookkeeping events are left out")
}

// TestServePrintsLimitsHit: a served session whose nodes hit their limits
// for real — a fixed firing cap and a firing window — prints a line for
// each in serve's default output, naming the session, the node, the limit
// and the reason, while the session goes on serving.
func TestServePrintsLimitsHit(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "limits.dot")
	require.NoError(t, os.WriteFile(file, []byte(`digraph limits {
		kind="session"
		capped [prompt="answer", max_visits=1]
		windowed [prompt="answer", max_visits="1/1h"]
	}`), 0o644))
	url, stdout, stderr := servedFile(t, file, "s1")
	pub := func(node, text string) {
		t.Helper()
		require.Eventually(t, func() bool {
			code, _, _ := cli(t, "pub", "s1", node, text, "--nats", url, "--token", "out", "--timeout", "2s")
			return code == 0
		}, 30*time.Second, 100*time.Millisecond, "pub to %s: %s", node, stderr.String())
	}
	printed := func(what string) {
		t.Helper()
		require.Eventually(t, func() bool { return strings.Contains(stdout.String(), what) },
			30*time.Second, 20*time.Millisecond, "serve never printed %q:\n%s\n%s", what, stdout.String(), stderr.String())
	}
	line := func(node, kind string) string {
		for _, l := range strings.Split(stdout.String(), "\n") {
			if strings.Contains(l, " s1  ") && strings.Contains(l, node) && strings.Contains(l, kind+": ") {
				return l
			}
		}
		return ""
	}

	pub("capped", "first")
	printed("capped               success")
	pub("capped", "second")
	require.Eventually(t, func() bool { return line("capped", "iterations.exceeded") != "" },
		30*time.Second, 20*time.Millisecond, "no iterations.exceeded line for capped:\n%s", stdout.String())
	require.Contains(t, line("capped", "iterations.exceeded"), "reached its limit of 1 firings", "the line gives the cap")

	pub("windowed", "first")
	printed("windowed             success")
	pub("windowed", "second")
	require.Eventually(t, func() bool { return line("windowed", "iterations.waiting") != "" },
		30*time.Second, 20*time.Millisecond, "no iterations.waiting line for windowed:\n%s", stdout.String())
	require.Contains(t, line("windowed", "iterations.waiting"), "1/1h): it waits until", "the line gives the window and the wait")

	// Neither limit stopped the session: it still serves, and refuses the
	// capped node's next event visibly.
	pub("capped", "third")
	require.Eventually(t, func() bool { return strings.Count(stdout.String(), "node.refused: node capped") == 2 },
		30*time.Second, 20*time.Millisecond, "the third event was not refused visibly:\n%s", stdout.String())
	t.Logf("serve's output:\n%s", stdout.String())
}
