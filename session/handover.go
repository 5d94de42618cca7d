package session

import (
	"context"
	"errors"

	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// Handover stops a durable session so that another process of the
// deployment runs it next (placement moves it: docs/cluster.md). Unlike
// Stop, it first lets the firings that run finish and their records be
// written (actors.System.Quiesce), so the next owner runs none of them
// again: nodes start no new firing, the session's consumer stops, and
// Handover waits, until ctx ends, for every running firing but a pool
// node's job (its worker goes on; the next owner finds it) and a human gate
// waiting for its answer (the next owner asks again). Answers, triggers
// and explain requests go unanswered meanwhile (their senders try again
// and reach the next owner). Then it stops the
// session with a session.moved event (session.handing_over when it begins) (not session.stopped: watchers go on
// watching the next owner's events) and releases the lease at once, so the
// next owner claims it without waiting for its TTL. What ctx cut short runs
// again at the next owner. It returns ctx's error when the firings did not
// all end in time, ErrNotDurable for a session that is not durable.
func (s *Session) Handover(ctx context.Context) error {
	if !s.cfg.Durable {
		return ErrNotDurable
	}
	var err error
	if s.ctl != nil {
		// An answer taken now could be lost with a gate cut short:
		// unanswered, its sender tries again and reaches the next owner.
		_ = s.ctl.Close()
	}
	if s.sys != nil {
		s.sys.Emit(&pb.Event{Kind: "session.handing_over", Message: "handing over to another member: no new firing; the running ones finish"})
		err = s.sys.Quiesce(ctx)
	}
	s.handedOver.Store(true)
	s.Stop()
	return err
}

// ErrNotDurable: only a durable session can be handed over to another
// process (its state is in the store).
var ErrNotDurable = errors.New("session: not durable")
