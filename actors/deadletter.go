package actors

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
)

// deadLetterWait bounds the making of the dead-letter store before a dead
// letter is published.
const deadLetterWait = 30 * time.Second

// deadLetter publishes msg, a refused envelope, on the session's
// dead-letter subject (sy.<session>.dlq). A durable session's store of
// dead letters is made before the first one (Config.DeadLetters), not when
// the session starts: most sessions never refuse anything, and a stream
// costs the server milliseconds to make and to remove. Until it is made
// (it could not be: the store is away), a dead letter is published all
// the same, for its subscribers, and the next one tries again.
func (s *System) deadLetter(msg *nats.Msg) {
	s.ensureDeadLetters()
	_ = s.cfg.Conn.PublishMsg(msg)
	s.publishedForOthers()
}

func (s *System) ensureDeadLetters() {
	if s.cfg.DeadLetters == nil || s.dlqMade.Load() {
		return
	}
	s.dlqMu.Lock()
	defer s.dlqMu.Unlock()
	if s.dlqMade.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadLetterWait)
	defer cancel()
	if err := s.cfg.DeadLetters(ctx); err != nil {
		s.log.Warn("actors: the session's dead-letter stream", "session", s.cfg.SessionID, "err", err)
		return
	}
	s.dlqMade.Store(true)
}
