package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/nodes"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

// tickRun is what one firing of the digest saw: the scheduled time it
// stands for and whether it ran late.
type tickRun struct {
	at, scheduled time.Time
	late          string
}

// TestCronMisfire: an hourly durable session, stopped while a tick falls
// due and resumed later, fires the missed tick once, late, for its
// scheduled time; several missed ticks fire once; a resume after the late
// tick was committed does not fire it again; a missed tick older than the
// node's catchup is not fired, and cron.missed says so.
func TestCronMisfire(t *testing.T) {
	b := brokertest.Start(t)
	start := time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	at := func(h, m int) time.Time { return time.Date(2026, 3, 1, h, m, 0, 0, time.UTC) }
	runs := make(chan tickRun, 16)
	digest := nodes.HandlerFunc(func(_ context.Context, in *nodes.Input) (*nodes.Outcome, error) {
		sched, err := time.Parse(time.RFC3339, in.Context["schedule.time"])
		if err != nil {
			return nil, err
		}
		runs <- tickRun{at: clk.Now(), scheduled: sched, late: in.Context["schedule.late"]}
		return &nodes.Outcome{Status: nodes.StatusSuccess, Response: "digest"}, nil
	})
	g, diags := graph.Load("d.dot", []byte(`digraph d { kind=session;
		digest [type="test.digest", trigger=schedule, schedule="0 * * * *", catchup="45m"] }`))
	require.False(t, diags.HasErrors(), "%v", diags)
	events := make(chan *pb.Event, 1024)
	cfg := session.Config{ID: "misfire", Graph: g, Broker: b, Durable: true, Clock: clk,
		Handlers: map[string]nodes.Handler{"test.digest": digest},
		Observer: func(ev *pb.Event) {
			switch ev.Kind {
			case "cron.late", "cron.missed", "node.completed":
				events <- ev
			}
		}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nextEvent := func(kind string) *pb.Event {
		t.Helper()
		for {
			select {
			case ev := <-events:
				if ev.Kind == kind {
					return ev
				}
				require.NotContains(t, []string{"cron.late", "cron.missed"}, ev.Kind, "unexpected %s: %s", ev.Kind, ev.Message)
			case <-ctx.Done():
				t.Fatalf("no %s event", kind)
			}
		}
	}
	nextRun := func() tickRun {
		t.Helper()
		select {
		case r := <-runs:
			nextEvent("node.completed") // committed
			return r
		case <-ctx.Done():
			t.Fatal("the digest did not fire")
		}
		return tickRun{}
	}
	attr := func(ev *pb.Event, k string) string {
		for _, kv := range ev.GetAttrs() {
			if kv.GetKey() == k {
				return kv.GetValue()
			}
		}
		return ""
	}
	// onTime advances to the next hour and expects its tick, on time: no
	// firing came before it (a late one would have been queued first).
	onTime := func(s *session.Session, h int) {
		t.Helper()
		waitPending(t, clk)
		clk.Set(at(h, 0))
		require.Equal(t, tickRun{at: at(h, 0), scheduled: at(h, 0), late: "false"}, nextRun())
	}
	stopUntil := func(s *session.Session, until time.Time) *session.Session {
		t.Helper()
		s.Stop()
		clk.Set(until)
		s2, err := session.Resume(ctx, cfg)
		require.NoError(t, err)
		return s2
	}

	s, err := session.Start(ctx, cfg)
	require.NoError(t, err)
	// Stopped before its first tick, resumed after it: the schedule's
	// start was recorded, 10:00 fires late.
	s = stopUntil(s, at(10, 5))
	ev := nextEvent("cron.late")
	require.Equal(t, "2026-03-01T10:00:00Z", attr(ev, "scheduled"))
	require.Equal(t, tickRun{at: at(10, 5), scheduled: at(10, 0), late: "true"}, nextRun())

	// Stopped (the owner gone) across 11:00, resumed at 11:20: 11:00 fires
	// once, at once, late.
	s = stopUntil(s, at(11, 20))
	ev = nextEvent("cron.late")
	require.Equal(t, "2026-03-01T11:00:00Z", attr(ev, "scheduled"))
	require.Equal(t, "true", attr(ev, "late"))
	require.Equal(t, "1", attr(ev, "missed"))
	require.Equal(t, tickRun{at: at(11, 20), scheduled: at(11, 0), late: "true"}, nextRun())

	// Resumed again after the late tick was committed: it is not fired
	// again; the next tick is 12:00's, on time.
	s = stopUntil(s, at(11, 30))
	onTime(s, 12)

	// Three ticks missed (13:00, 14:00, 15:00): one firing, for 15:00.
	s = stopUntil(s, at(15, 30))
	ev = nextEvent("cron.late")
	require.Equal(t, "2026-03-01T15:00:00Z", attr(ev, "scheduled"))
	require.Equal(t, "3", attr(ev, "missed"))
	require.Equal(t, tickRun{at: at(15, 30), scheduled: at(15, 0), late: "true"}, nextRun())
	onTime(s, 16)

	// Beyond the catchup (45m): 17:00 is 50 minutes old at 17:50, not
	// fired, and cron.missed says so; 18:00 fires on time.
	s = stopUntil(s, at(17, 50))
	ev = nextEvent("cron.missed")
	require.Equal(t, "digest", ev.GetNode())
	require.Equal(t, "2026-03-01T17:00:00Z", attr(ev, "scheduled"))
	require.Equal(t, "1", attr(ev, "missed"))
	require.Equal(t, "45m0s", attr(ev, "catchup"))
	require.Contains(t, ev.GetMessage(), "not fired")
	onTime(s, 18)
	s.Stop()
	select {
	case r := <-runs:
		t.Fatalf("an extra firing: %+v", r)
	default:
	}
}
