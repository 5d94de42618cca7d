package actors

import (
	"context"
	"fmt"
	"time"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/internal/crash"
)

// A work stream made late (Config.MakeStream). A durable pipeline's input
// and hops are handed in process once their records are stored: its work
// stream holds outside input only, which most pipelines never get. A
// stream is a directory and files the server makes and removes (a third
// of the CPU of a 10-node durable Run when every Run made one), so a new
// durable pipeline runs without one, in ingress mode: its
// intake takes what outside publishers send to its inboxes and edges, and
// the first envelope it accepts makes the stream (storing the session's
// Stored subjects) and its consumer before it is republished there, as
// does the first envelope the runtime itself stores there (Send). A
// session left unfinished has its stream made listing its inbound
// subjects when its process lets go of it (ListInbound), so outside input
// is stored while nobody serves it. Kill point stream-made-late: the
// stream made, the envelope not yet stored (its publisher, unanswered,
// publishes again).

// StreamMade says whether the durable session's work stream was made:
// always, but for a session started without one (Config.MakeStream) until
// outside input or ListInbound made it.
func (s *System) StreamMade() bool {
	return s.cfg.MakeStream == nil || s.lateMade.Load()
}

// makeStreamLate makes the session's work stream and, while the session
// serves (consumer), its consumer, feeding it once the session consumes.
// subjects is broker.Ingress or broker.Inbound. It does nothing once the
// stream is made.
func (s *System) makeStreamLate(subjects broker.Option, consumer bool) error {
	if s.StreamMade() {
		return nil
	}
	s.lateMu.Lock()
	defer s.lateMu.Unlock()
	if s.lateMade.Load() {
		return nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	if err := s.cfg.MakeStream(ctx, subjects); err != nil {
		return fmt.Errorf("actors: making the work stream: %w", err)
	}
	crash.Point("stream-made-late") // made; the envelope that asked for it not stored yet
	if consumer {
		if err := s.makeConsumer(ctx, 0, false); err != nil {
			return err
		}
	}
	s.lateMade.Store(true)
	if consumer {
		return s.startFeed()
	}
	return nil
}
