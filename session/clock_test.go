package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/nodes"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

// blockUntilDone registers custom.echo as a handler that says it started
// and then waits for its context to end.
func blockUntilDone(t *testing.T, cfg *session.Config, started chan<- string) {
	require.NoError(t, cfg.Registry.Replace(nodes.Info{Type: "custom.echo", Handler: nodes.HandlerFunc(
		func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
			started <- in.Node.ID
			<-ctx.Done()
			return nil, ctx.Err()
		})}))
}

// farFuture is a fake time no real clock reaches during a test: a deadline
// kept on the real clock would never pass.
var farFuture = time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)

// startBlocked starts src (kind "pipeline" or "session") on a fake clock
// with custom.echo blocking until its context ends, sends the session's
// slow node a message, and returns once that handler started; ctx bounds
// the test.
func startBlocked(t *testing.T, kind, src string) (*clock.Fake, *live, context.Context) {
	t.Helper()
	r := newRun(t)
	clk := clock.NewFake(farFuture)
	cfg := r.config(r.load(src))
	cfg.Clock = clk
	started := make(chan string, 1)
	blockUntilDone(t, &cfg, started)
	events := make(chan *pb.Event, 1000)
	cfg.Observer = func(ev *pb.Event) { r.observe(ev); events <- ev }
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	s, err := session.Start(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	l := &live{run: r, s: s, events: events}
	if kind == "session" {
		l.publish(t, broker.NodeIn(s.ID(), "slow"), "go")
	}
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the handler never started")
	}
	return clk, l, ctx
}

// TestNodeTimeoutUsesTheSessionClock: a node's timeout passes when the
// session's clock says so.
func TestNodeTimeoutUsesTheSessionClock(t *testing.T) {
	for _, tc := range []struct{ name, src string }{
		{"pipeline", `digraph p { start [shape=Mdiamond]; slow [type="custom.echo", timeout=1h]; exit [shape=Msquare]; start -> slow -> exit }`},
		{"session", `digraph s { kind="session"; slow [type="custom.echo", timeout=1h] }`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk, l, ctx := startBlocked(t, tc.name, tc.src)
			s := l.s
			clk.Advance(59 * time.Minute)
			clk.Advance(time.Minute)
			ev := l.waitEvent(t, "slow completed", completedBy("slow"))
			require.Equal(t, "fail", ev.Status)
			require.Contains(t, ev.Message, "timeout: context deadline exceeded")
			if tc.name == "pipeline" {
				rep, err := s.Wait(ctx)
				require.NoError(t, err)
				require.Equal(t, "fail", rep.Status)
			}
		})
	}
}

// TestTimeBudgetUsesTheSessionClock: a budget_time deadline cancels the
// running handler when the session's clock reaches it.
func TestTimeBudgetUsesTheSessionClock(t *testing.T) {
	for _, tc := range []struct{ name, src string }{
		{"pipeline", `digraph p { budget_time=2h; start [shape=Mdiamond]; slow [type="custom.echo"]; exit [shape=Msquare]; start -> slow -> exit }`},
		{"session", `digraph s { kind="session"; slow [type="custom.echo", budget_time=2h] }`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk, l, ctx := startBlocked(t, tc.name, tc.src)
			s := l.s
			clk.Advance(time.Hour)
			require.Nil(t, l.event("node.completed", "slow"), "an hour in, the budget holds")
			clk.Advance(time.Hour)
			ev := l.waitEvent(t, "slow completed", completedBy("slow"))
			require.Equal(t, "fail", ev.Status)
			require.Contains(t, ev.Message, "the time budget ran out")
			if tc.name == "pipeline" {
				rep, err := s.Wait(ctx)
				require.NoError(t, err)
				require.Equal(t, "fail", rep.Status)
				require.Contains(t, rep.Reason, "time budget")
			}
		})
	}
}
