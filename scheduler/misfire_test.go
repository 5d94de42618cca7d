package scheduler_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/scheduler"
)

// resumed is a scheduler made again from snap at now, started: what a
// resume or a takeover does.
func resumed(t *testing.T, src string, snap scheduler.Snapshot, now time.Time) (*scheduler.Scheduler, *notices, []scheduler.Event) {
	t.Helper()
	ns := &notices{}
	s, err := scheduler.New(config(t, src), clock.NewFake(now), ns.add)
	require.NoError(t, err)
	s.Restore(snap)
	evs := s.Start()
	s.CatchUp()
	t.Cleanup(s.Close)
	return s, ns, evs
}

// TestCronCatchUp: a schedule node's last fired tick is in its snapshot
// once its firing is released; a scheduler started later fires the latest
// missed time once, late, within catchup, and not again once that firing
// was released; past catchup it fires none and says so.
func TestCronCatchUp(t *testing.T) {
	const src = `digraph g { d [trigger=schedule, schedule="0 * * * *", catchup="45m"] }`
	s, clk, ns := newSched(t, src)
	require.Equal(t, t0, s.Snapshot().Ticks["d"], "the schedule starts from now")
	clk.Advance(time.Hour)
	require.Equal(t, []scheduler.Notice{{Node: "d", Kind: scheduler.NoticeTimer}}, ns.take())
	d, err := s.Timer("d")
	require.NoError(t, err)
	require.True(t, d.Fire)
	require.Equal(t, t0.Add(time.Hour), d.Scheduled)
	require.False(t, d.Late)
	tk := admit(t, s, "d")
	require.Equal(t, t0.Add(time.Hour), tk.Scheduled)
	require.Equal(t, t0, s.SnapshotOf("").Ticks["d"], "not fired until released")
	s.Release(tk, scheduler.Result{Tick: true, Status: "success"})
	snap := s.Snapshot()
	require.Equal(t, t0.Add(time.Hour), snap.Ticks["d"])
	require.Equal(t, t0.Add(time.Hour), s.SnapshotOf("other").Ticks["d"], "every record carries the ticks")

	// Down from 11:00 to 14:20: 12, 13 and 14 missed, 14:00 fires late.
	s2, ns2, evs := resumed(t, src, snap, t0.Add(4*time.Hour+20*time.Minute))
	require.Empty(t, evs)
	require.Equal(t, []scheduler.Notice{{Node: "d", Kind: scheduler.NoticeTimer}}, ns2.take(), "fired at once")
	d, err = s2.Timer("d")
	require.NoError(t, err)
	require.Equal(t, scheduler.Decision{Fire: true, Tick: true, Scheduled: t0.Add(4 * time.Hour), Late: true, Missed: 3}, d)
	require.Contains(t, s2.Waiting("d"), "next cron time 2026-11-22T15:00:00Z")
	s2.Release(admit(t, s2, "d"), scheduler.Result{Tick: true, Status: "success"})
	snap = s2.Snapshot()

	// Resumed again at 14:30: 14:00 was committed, nothing to fire.
	_, ns3, evs := resumed(t, src, snap, t0.Add(4*time.Hour+30*time.Minute))
	require.Empty(t, evs)
	require.Empty(t, ns3.take())

	// A firing admitted but never released (the owner died) is owed again.
	s4, ns4, _ := resumed(t, src, snap, t0.Add(5*time.Hour+10*time.Minute))
	require.Len(t, ns4.take(), 1)
	d, _ = s4.Timer("d")
	require.Equal(t, t0.Add(5*time.Hour), d.Scheduled)
	admit(t, s4, "d")
	_, ns5, _ := resumed(t, src, s4.Snapshot(), t0.Add(5*time.Hour+12*time.Minute))
	require.Len(t, ns5.take(), 1, "the uncommitted tick fires again")

	// Down until 15:50: 15:00 is 50 minutes old, past catchup.
	_, ns6, evs := resumed(t, src, snap, t0.Add(5*time.Hour+50*time.Minute))
	require.Empty(t, ns6.take())
	require.Len(t, evs, 1)
	require.Equal(t, scheduler.EventCronMissed, evs[0].Kind)
	require.Equal(t, map[string]string{"scheduled": "2026-11-22T15:00:00Z", "first_missed": "2026-11-22T15:00:00Z",
		"missed": "1", "catchup": "45m0s", "next": "2026-11-22T16:00:00Z"}, evs[0].Fields)
}

// TestCronCatchUpOff: catchup=0 skips missed ticks; an explicit trigger
// stands for no scheduled time; a frequent schedule down for a month
// fires once.
func TestCronCatchUpOff(t *testing.T) {
	snap := scheduler.Snapshot{Ticks: map[string]time.Time{"d": t0}}
	_, ns, evs := resumed(t, `digraph g { d [trigger=schedule, schedule="* * * * *", catchup=0] }`, snap, t0.Add(90*time.Second))
	require.Empty(t, ns.take())
	require.Len(t, evs, 1)
	require.Contains(t, evs[0].Reason, "catchup=0")

	s, ns, evs := resumed(t, `digraph g { d [trigger=schedule, schedule="@every 1s"] }`, snap, t0.Add(30*24*time.Hour+500*time.Millisecond))
	require.Empty(t, evs)
	require.Len(t, ns.take(), 1)
	d, _ := s.Timer("d")
	require.Equal(t, t0.Add(30*24*time.Hour), d.Scheduled)
	require.Equal(t, -1, d.Missed, "more than could be counted")

	d, err := s.Trigger("d")
	require.NoError(t, err)
	require.True(t, d.Fire)
	require.True(t, d.Scheduled.IsZero())
}

// TestCronCatchUpNoTimeToCome: a schedule with no time to come (30
// February) resumes without looping.
func TestCronCatchUpNoTimeToCome(t *testing.T) {
	snap := scheduler.Snapshot{Ticks: map[string]time.Time{"d": t0}}
	_, ns, evs := resumed(t, `digraph g { d [trigger=schedule, schedule="0 0 30 2 *"] }`, snap, t0.Add(time.Hour))
	require.Empty(t, evs)
	require.Empty(t, ns.take())
}
