package scheduler

import (
	"time"

	"github.com/robfig/cron/v3"

	"github.com/switchyard/switchyard/clock"
)

var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

func parseCron(spec string) (cron.Schedule, error) { return cronParser.Parse(spec) }

// gateCron fires on a cron schedule with a tick (and whatever arrived in
// between); arrivals alone do not fire it.
type gateCron struct {
	sched cron.Schedule
	clk   clock.Clock
	arm   func(d time.Duration) clock.Timer
	timer clock.Timer
	next  time.Time // the scheduled time the timer is armed for
	held  []Input
	// late: the armed time is a missed one, fired at once (catch-up);
	// missed counts the scheduled times it stands for.
	late   bool
	missed int
}

func newGateCron(spec string, clk clock.Clock, arm func(time.Duration) clock.Timer) (*gateCron, error) {
	s, err := parseCron(spec)
	if err != nil {
		return nil, err
	}
	return &gateCron{sched: s, clk: clk, arm: arm}, nil
}

// start arms the timer for the next scheduled time after now.
func (g *gateCron) start() {
	now := g.clk.Now()
	g.next = g.sched.Next(now)
	g.timer = g.arm(g.next.Sub(now))
}

// maxMissedCount bounds the count of missed times a catch-up reports (an
// "@every 1s" node stopped for a month missed 2.6 million).
const maxMissedCount = 10000

// resume arms the timer after a start, a resume, a takeover or a handover:
// last is the scheduled time of the last tick the node fired (committed),
// or when its schedule started. When the schedule had times after last and
// at or before now (missed: nobody owned the session then), the latest
// of them fires once at once if it is no older than catchup (0: never);
// otherwise they are skipped and the returned event says so. Either way
// the next time after now follows. fireNow reports a catch-up: the owner
// fires it (Timer) at once, which arms the next time. A schedule with no
// time to come (Next is zero: "0 0 30 2 *") is armed as start arms it.
func (g *gateCron) resume(node string, last time.Time, catchup time.Duration) (evs []Event, fireNow bool) {
	at := g.clk.Now()
	first := g.sched.Next(last)
	if first.IsZero() {
		g.start()
		return nil, false
	}
	if first.After(at) {
		g.next = first
		g.timer = g.arm(first.Sub(at))
		return nil, false
	}
	latest, n := first, 1
	for t := g.sched.Next(first); !t.IsZero() && !t.After(at); t = g.sched.Next(t) {
		latest, n = t, n+1
		if n == maxMissedCount {
			// Jump to the last stretch: the latest is what matters.
			n, latest = -1, g.lastBefore(at, latest)
			break
		}
	}
	count := itoa(n)
	if n < 0 {
		count = itoa(maxMissedCount) + "+"
	}
	fields := map[string]string{"scheduled": stamp(latest), "first_missed": stamp(first), "missed": count,
		"catchup": catchup.String()}
	if catchup > 0 && at.Sub(latest) <= catchup {
		g.next, g.late, g.missed = latest, true, n
		return nil, true
	}
	g.next = g.sched.Next(at)
	g.timer = g.arm(g.next.Sub(at))
	fields["next"] = stamp(g.next)
	reason := "missed " + count + " scheduled time(s), the latest " + stamp(latest) + ": older than catchup " + catchup.String() + ", not fired"
	if catchup <= 0 {
		reason = "missed " + count + " scheduled time(s), the latest " + stamp(latest) + ": catchup=0, not fired"
	}
	return []Event{{Kind: EventCronMissed, Node: node, Reason: reason, Fields: fields}}, false
}

// lastBefore is the last scheduled time at or before now, from a time
// after from (a long way back): it steps back from now until a window
// holds one.
func (g *gateCron) lastBefore(now, from time.Time) time.Time {
	for back := time.Minute; ; back *= 2 {
		start := now.Add(-back)
		if !start.After(from) {
			start = from
		}
		var latest time.Time
		for t := g.sched.Next(start); !t.IsZero() && !t.After(now); t = g.sched.Next(t) {
			latest = t
		}
		if !latest.IsZero() || start.Equal(from) {
			if latest.IsZero() {
				return from
			}
			return latest
		}
	}
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func (g *gateCron) stop() {
	if g.timer != nil {
		g.timer.Stop()
	}
}

func (g *gateCron) Offer(in Input) Decision {
	g.held = append(g.held, in)
	return Decision{Reason: g.Waiting()}
}

// Trigger is an explicit trigger: it stands for no scheduled time.
func (g *gateCron) Trigger() Decision { return g.fire() }

func (g *gateCron) fire() Decision {
	d := Decision{Fire: true, Tick: true, Inputs: g.held}
	g.held = nil
	return d
}

func (g *gateCron) Skip(string) Decision { return Decision{} }

// Timer is the scheduled time: fire and arm the next one.
func (g *gateCron) Timer() Decision {
	d := g.fire()
	d.Scheduled, d.Late, d.Missed = g.next, g.late, g.missed
	g.late, g.missed = false, 0
	g.rearm()
	return d
}

// rearm arms the time that follows the one that fired, not the one that
// follows now: a firing handled late does not shift the schedule (an
// "@every 1m" node keeps its minute marks). Times already past are skipped,
// not fired in a burst.
func (g *gateCron) rearm() {
	now := g.clk.Now()
	next := g.sched.Next(g.next)
	if g.next.IsZero() || !next.After(now) {
		next = g.sched.Next(now)
	}
	g.next = next
	g.timer = g.arm(next.Sub(now))
}

func (g *gateCron) Waiting() string { return "next cron time " + g.next.UTC().Format(time.RFC3339) }

// Wants nothing until the scheduled time: arrivals wait in their buffers.
func (g *gateCron) Wants(string) bool { return false }

func (g *gateCron) cause() string { return CauseNextCron }

func (g *gateCron) evidence() map[string]string {
	return map[string]string{"next": g.next.UTC().Format(time.RFC3339), "held": itoa(len(g.held))}
}

var _ interface {
	Gate
	causer
} = (*gateCron)(nil)
