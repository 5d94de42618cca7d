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

// TestCronMisfireUncommitted: a tick whose firing was running when the
// session stopped (the owner gone, nothing committed) is fired again,
// late, for the same scheduled time, under the same tick id; once that
// firing is committed, a resume fires nothing.
func TestCronMisfireUncommitted(t *testing.T) {
	b := brokertest.Start(t)
	clk := clock.NewFake(time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC))
	at := func(h, m int) time.Time { return time.Date(2026, 3, 1, h, m, 0, 0, time.UTC) }
	blocked := make(chan struct{})
	var calls int
	runs := make(chan tickRun, 16)
	ids := make(chan string, 16)
	digest := nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
		calls++ // one firing at a time
		for _, m := range in.Messages {
			ids <- m.ID
		}
		if calls == 1 {
			close(blocked)
			<-ctx.Done() // the owner goes away mid-firing
			return nil, ctx.Err()
		}
		sched, err := time.Parse(time.RFC3339, in.Context["schedule.time"])
		if err != nil {
			return nil, err
		}
		runs <- tickRun{at: clk.Now(), scheduled: sched, late: in.Context["schedule.late"]}
		return &nodes.Outcome{Status: nodes.StatusSuccess, Response: "digest"}, nil
	})
	g, diags := graph.Load("d.dot", []byte(`digraph d { kind=session;
		digest [type="test.digest", trigger=schedule, schedule="0 * * * *"] }`))
	require.False(t, diags.HasErrors(), "%v", diags)
	completed := make(chan struct{}, 16)
	cfg := session.Config{ID: "inflight", Graph: g, Broker: b, Durable: true, Clock: clk,
		Handlers: map[string]nodes.Handler{"test.digest": digest},
		Observer: func(ev *pb.Event) {
			if ev.Kind == "node.completed" {
				completed <- struct{}{}
			}
		}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := session.Start(ctx, cfg)
	require.NoError(t, err)
	waitPending(t, clk)
	clk.Set(at(10, 0))
	select {
	case <-blocked:
	case <-ctx.Done():
		t.Fatal("the 10:00 tick did not fire")
	}
	first := <-ids
	s.Stop()

	clk.Set(at(10, 3))
	s, err = session.Resume(ctx, cfg)
	require.NoError(t, err)
	select {
	case r := <-runs:
		require.Equal(t, tickRun{at: at(10, 3), scheduled: at(10, 0), late: "true"}, r)
	case <-ctx.Done():
		t.Fatal("the uncommitted 10:00 tick did not fire again")
	}
	require.Equal(t, first, <-ids, "the same tick, the same id")
	select {
	case <-completed:
	case <-ctx.Done():
		t.Fatal("not committed")
	}
	s.Stop()

	clk.Set(at(10, 10))
	s, err = session.Resume(ctx, cfg)
	require.NoError(t, err)
	waitPending(t, clk)
	clk.Set(at(11, 0))
	select {
	case r := <-runs:
		require.Equal(t, tickRun{at: at(11, 0), scheduled: at(11, 0), late: "false"}, r, "10:00 is not fired a third time")
	case <-ctx.Done():
		t.Fatal("the 11:00 tick did not fire")
	}
	// Committed before the stop: a stop racing the commit may leave the
	// journal retrying a refused write on the fake clock, which nobody
	// advances.
	select {
	case <-completed:
	case <-ctx.Done():
		t.Fatal("not committed")
	}
	s.Stop()
}
