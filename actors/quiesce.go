package actors

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchyard/switchyard/pool"
)

// Quiescing: a session handed over to another process (placement moves it,
// docs/cluster.md#rebalancing) first stops starting firings and lets the
// firings that run finish and their records be written, so that the next
// owner runs none of them again; then it stops (Stop).

// quiesceState is whether the system quiesces, and how the actors tell a
// waiting Quiesce that one of them went idle.
type quiesceState struct {
	on   atomic.Bool
	once sync.Once
	wake chan struct{}
}

func (q *quiesceState) ch() chan struct{} {
	q.once.Do(func() { q.wake = make(chan struct{}, 1) })
	return q.wake
}

// poke tells a waiting Quiesce that a firing ended (never blocks).
func (q *quiesceState) poke() {
	if !q.on.Load() {
		return
	}
	select {
	case q.ch() <- struct{}{}:
	default:
	}
}

// quiesceQuery asks an actor whether it is idle for a handover.
type quiesceQuery struct{}

// idleForHandover reports whether the node has nothing the next owner could
// run twice: no firing running and no record being written — save a
// firing that is safe to leave, which the next owner finds as it is: a pool
// node's job (its worker goes on; the next owner finds the job in the work
// stream, or its outcome) and a human gate waiting for its answer (the next
// owner asks again; nothing was done).
func (a *nodeActor) idleForHandover() bool {
	if a.inflight > 0 {
		return false
	}
	if !a.running {
		return true
	}
	if a.cur == nil {
		return false // its record is being written
	}
	if pool.Of(a.node) != "" {
		return true
	}
	_, asking := a.s.asking(a.node.ID)
	return asking
}

// Quiesce prepares a handover to another process: the nodes start no new
// firing (what arrives is held, not acknowledged, and goes to the next
// owner), the session's consumer stops delivering, its control subjects
// (trigger, explain) go unanswered until the next owner answers them, and
// Quiesce waits until
// every running firing has ended and its record is stored — but for those
// that are safe to leave (a pool node's job, a human gate waiting for an
// answer) — or until ctx ends (ctx's error: Stop then cancels what still
// runs, which the next owner runs again). Stop must follow; a quiesced
// system does not fire again.
func (s *System) Quiesce(ctx context.Context) error {
	wake := s.quiesce.ch()
	s.quiesce.on.Store(true)
	s.stopConsuming()
	// No trigger is taken that would not fire here: unanswered, its
	// sender tries again and reaches the next owner.
	s.mu.Lock()
	subs := s.subs
	s.mu.Unlock()
	for _, sub := range subs {
		_ = sub.Unsubscribe() // Stop's second Unsubscribe is a no-op
	}
	for {
		if s.allIdle() {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// allIdle asks every node actor whether it is idle for a handover.
func (s *System) allIdle() bool {
	s.mu.Lock()
	pids := make([]*actor.PID, 0, len(s.actors))
	for _, a := range s.actors {
		pids = append(pids, a.pid)
	}
	stopped := s.stopped
	s.mu.Unlock()
	if stopped {
		return true
	}
	for _, p := range pids {
		res, err := s.as.await(func() *actor.Future { return s.root.RequestFuture(p, &quiesceQuery{}, 5*time.Second) })
		if idle, _ := res.(bool); err != nil || !idle {
			return false
		}
	}
	return true
}
