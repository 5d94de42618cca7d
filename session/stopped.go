package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard/switchyard/broker"
)

// A durable session stopped by its operator (switchyard stop, Session.End)
// has ended: its bucket records who stopped it and when (stoppedKey), the
// store lists it as "stopped", and nothing resumes it on its own — not
// serve --all, not serve --takeover, not serve FILE. Resume refuses it with
// a *StoppedError unless Config.Reopen says to run it again (switchyard
// resume S --reopen), which records the reopening and clears the stop. A
// session that was only interrupted (SIGINT of serve, a crash) is not
// stopped: it stays running in the store and is resumed as before.

// stoppedKey is the key of the session's bucket that records its stop.
const stoppedKey = "session.stopped"

// StopRecord is who stopped a durable session, and when. A record with a
// zero At is a reopened session's (not stopped).
type StopRecord struct {
	By         string    `json:"by,omitempty"`
	At         time.Time `json:"at,omitzero"`
	ReopenedBy string    `json:"reopened_by,omitempty"`
	ReopenedAt time.Time `json:"reopened_at,omitzero"`
}

// StoppedError is Resume's refusal of a session its operator stopped.
type StoppedError struct {
	Session string
	Record  StopRecord
}

func (e *StoppedError) Error() string {
	by := e.Record.By
	if by == "" {
		by = "an operator"
	}
	return fmt.Sprintf("session %s was stopped by %s at %s (switchyard stop); to run it again: switchyard resume %s --reopen",
		e.Session, by, e.Record.At.UTC().Format(time.RFC3339), e.Session)
}

// ReadStopped returns the stop record of durable session id, nil when it
// was not stopped (or was reopened since).
func ReadStopped(ctx context.Context, b *broker.Broker, id string) (*StopRecord, error) {
	kv, err := openKV(ctx, b, id)
	if err != nil {
		return nil, err
	}
	return readStopped(ctx, kv)
}

func readStopped(ctx context.Context, kv kvGetter) (*StopRecord, error) {
	e, err := kv.Get(ctx, stoppedKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r := &StopRecord{}
	if err := json.Unmarshal(e.Value(), r); err != nil {
		return nil, fmt.Errorf("session: stop record: %w", err)
	}
	if r.At.IsZero() {
		return nil, nil
	}
	return r, nil
}

// End stops the session as its operator's decision: a durable session
// records who (by) stopped it and when before it stops (the write fenced
// like the journal's), so that no resume, serve --all or takeover runs it
// again on its own. A session that is not durable just stops. The record's
// error is returned; the session is stopped in any case.
func (s *Session) End(by string) error {
	var err error
	if s.cfg.Durable && s.jr.kv != nil {
		data, _ := json.Marshal(StopRecord{By: by, At: s.cfg.Clock.Now().UTC()})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		s.jr.wmu.Lock()
		err = s.jr.putLocked(ctx, stoppedKey, data)
		s.jr.wmu.Unlock()
		cancel()
		if err != nil {
			err = fmt.Errorf("session %s: recording the stop: %w", s.id, err)
		} else {
			s.ended.Store(true)
		}
	}
	s.Stop()
	return err
}

// checkStopped refuses, after the lease is claimed, to resume a session
// that was stopped, unless cfg.Reopen: then the reopening is recorded
// (fenced after the owner's mark, which it moves the fence past).
func checkStopped(ctx context.Context, cfg *Config, l *lease) error {
	r, err := readStopped(ctx, l.bucket)
	if err != nil || r == nil {
		return err
	}
	if !cfg.Reopen {
		return &StoppedError{Session: cfg.ID, Record: *r}
	}
	r.ReopenedBy, r.ReopenedAt = cfg.ReopenedBy, cfg.Clock.Now().UTC()
	r.By, r.At = "", time.Time{}
	data, _ := json.Marshal(r)
	ack, err := cfg.Broker.JetStream().Publish(ctx, l.bucket.Subject(stoppedKey), data, fenceOpt(l.bucket, l.fence))
	if err != nil {
		return fmt.Errorf("session %s: reopening: %w", cfg.ID, err)
	}
	if !l.bucket.Shared() {
		l.fence = ack.Sequence // in the shared bucket the fence stays the mark's
	}
	return nil
}
