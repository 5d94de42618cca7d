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
	next  time.Time
	held  []Input
}

func newGateCron(spec string, clk clock.Clock, arm func(time.Duration) clock.Timer) (*gateCron, error) {
	s, err := parseCron(spec)
	if err != nil {
		return nil, err
	}
	return &gateCron{sched: s, clk: clk, arm: arm}, nil
}

// start arms the timer for the next scheduled time.
func (g *gateCron) start() {
	now := g.clk.Now()
	g.next = g.sched.Next(now)
	g.timer = g.arm(g.next.Sub(now))
}

func (g *gateCron) stop() {
	if g.timer != nil {
		g.timer.Stop()
	}
}

func (g *gateCron) Offer(in Input) Decision {
	g.held = append(g.held, in)
	return Decision{Reason: g.Waiting()}
}

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
