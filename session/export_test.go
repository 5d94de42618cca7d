package session

import (
	"context"
	"fmt"
	"time"

	"github.com/switchyard/switchyard/broker"
)

// SetJournalKeep changes JournalKeep and the compaction period for a test;
// the returned function restores them.
func SetJournalKeep(keep int, every uint64) (restore func()) {
	k, e := JournalKeep, compactEvery
	JournalKeep, compactEvery = keep, every
	return func() { JournalKeep, compactEvery = k, e }
}

// ArtifactSweeps is how many retention sweeps of its artifacts a durable
// session did, and how many objects they deleted.
func ArtifactSweeps(s *Session) (sweeps, deleted int64) {
	if s.sweep == nil {
		return 0, 0
	}
	return s.sweep.sweeps.Load(), s.sweep.deleted.Load()
}

// SweepArtifacts trims a durable session's work stream, makes its sweeper
// sweep until a sweep knew of every commit made so far, stops the session
// and returns the most commits there were between two of its sweeps and
// how many envelopes the work stream still stored after the trim (each
// keeps the objects it refers to).
func SweepArtifacts(s *Session) (maxGap, stored uint64, err error) {
	w := s.sweep
	if w == nil {
		return 0, 0, nil
	}
	// The work stream is trimmed (every compactEvery commits, beside the
	// writer) of what was consumed first: until then its envelopes keep
	// their objects live.
	deadline := time.Now().Add(time.Minute)
	var floors map[string]uint64
	for {
		s.jr.mu.Lock()
		if !s.jr.maintaining {
			s.jr.maintaining, floors = true, copyMap(s.jr.floors)
			s.jr.mu.Unlock()
			break
		}
		s.jr.mu.Unlock()
		if time.Now().After(deadline) {
			return 0, 0, fmt.Errorf("the journal's upkeep ran for a minute")
		}
		time.Sleep(10 * time.Millisecond) // polling the upkeep goroutine, with a deadline
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s.jr.trim(ctx, floors)
	st, err := s.jr.js.Stream(ctx, broker.StreamName(s.id))
	if err != nil {
		return 0, 0, err
	}
	stored = st.CachedInfo().State.Msgs
	s.jr.mu.Lock()
	s.jr.maintaining = false
	s.jr.mu.Unlock()
	w.mu.Lock()
	target := w.last
	w.mu.Unlock()
	// A sweep under way may have read the stream before the trim: the one
	// after it is the one that counts.
	after := w.sweeps.Load() + 2
	for w.swept.Load() < target || w.sweeps.Load() < after {
		if time.Now().After(deadline) {
			return 0, 0, fmt.Errorf("no sweep reached commit %d in a minute (last %d)", target, w.swept.Load())
		}
		select {
		case w.kick <- struct{}{}:
		default:
		}
		time.Sleep(10 * time.Millisecond) // polling the sweeper's progress, with a deadline
	}
	s.Stop() // the sweeps are over: maxGap is read by this goroutine alone
	return w.maxGap, stored, nil
}
