package session

import (
	"fmt"
	"time"
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

// SweepArtifacts makes a durable session's sweeper sweep until a sweep
// knew of every commit made so far, and returns the most commits there
// were between two of its sweeps.
func SweepArtifacts(s *Session) (maxGap uint64, err error) {
	w := s.sweep
	if w == nil {
		return 0, nil
	}
	w.mu.Lock()
	target := w.last
	w.mu.Unlock()
	deadline := time.Now().Add(time.Minute)
	for w.swept.Load() < target {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("no sweep reached commit %d in a minute (last %d)", target, w.swept.Load())
		}
		select {
		case w.kick <- struct{}{}:
		default:
		}
		time.Sleep(10 * time.Millisecond) // polling the sweeper's progress, with a deadline
	}
	s.Stop() // the sweeps are over: maxGap is read by this goroutine alone
	return w.maxGap, nil
}
