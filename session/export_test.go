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

// HoldUpkeep makes the journal's upkeep look busy until release: every
// upkeep due meanwhile is skipped (maintainLocked). Call it before the
// session writes records.
func HoldUpkeep(s *Session) (release func()) {
	s.jr.mu.Lock()
	s.jr.maintaining = true
	s.jr.mu.Unlock()
	return func() {
		s.jr.mu.Lock()
		s.jr.maintaining = false
		s.jr.mu.Unlock()
	}
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
	deadline := time.Now().Add(time.Minute)
	stored, err = trimWork(s)
	if err != nil {
		return 0, 0, err
	}
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

// trimWork trims a durable session's work stream of what its nodes
// consumed (the journal does it every compactEvery commits, beside the
// writer: until then its envelopes keep their objects live) and returns
// how many envelopes it still stores.
func trimWork(s *Session) (stored uint64, err error) {
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
			return 0, fmt.Errorf("the journal's upkeep ran for a minute")
		}
		time.Sleep(10 * time.Millisecond) // polling the upkeep goroutine, with a deadline
	}
	defer func() {
		s.jr.mu.Lock()
		s.jr.maintaining = false
		s.jr.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s.jr.trim(ctx, floors)
	st, err := s.jr.js.Stream(ctx, broker.StreamName(s.id))
	if err != nil {
		return 0, err
	}
	return st.CachedInfo().State.Msgs, nil
}

// SweepArtifactsNow trims a durable session's work stream, waits for a
// retention sweep that started after the call and returns the last journal
// record written that the sweep judged by.
func SweepArtifactsNow(s *Session) (written uint64, err error) {
	w := s.sweep
	if _, err := trimWork(s); err != nil {
		return 0, err
	}
	deadline := time.Now().Add(time.Minute)
	// A sweep under way may have listed the store before: the one after
	// it is the one that counts.
	after := w.sweeps.Load() + 2
	for w.sweeps.Load() < after {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("no sweep in a minute")
		}
		select {
		case w.kick <- struct{}{}:
		default:
		}
		time.Sleep(5 * time.Millisecond) // polling the sweeper's progress, with a deadline
	}
	return w.judged.Load(), nil
}

// TrimWork trims a durable session's work stream now, as the journal's
// upkeep does every compactEvery records.
func TrimWork(s *Session) error {
	_, err := trimWork(s)
	return err
}

// PreparedNext waits for the store the broker prepares for its next
// durable pipeline start (the first of those it made ahead) and returns its id ("" when none is prepared).
func PreparedNext(b *broker.Broker) string {
	p := preparerOf(b)
	if p == nil {
		return ""
	}
	p.mu.Lock()
	var next *preparedStore
	if len(p.next) > 0 {
		next = p.next[0]
	}
	p.mu.Unlock()
	if next == nil {
		return ""
	}
	<-next.ready
	if next.err != nil {
		return ""
	}
	return next.id
}

// TookPrepared says whether the session took a prepared store.
func TookPrepared(s *Session) bool { return s.prepared != nil }

// SetPreparedBurst changes how close two starts must be for the next
// one's store to be prepared; the returned function restores it.
func SetPreparedBurst(d time.Duration) (restore func()) {
	old := preparedBurst
	preparedBurst = d
	return func() { preparedBurst = old }
}

// ClaimPreparedStore makes and leases the store of id as a prepared store
// is made (as an id NewID made, not looked up first) and removes it; its
// error is the claim's (ErrIDTaken when the store held a session of id).
func ClaimPreparedStore(ctx context.Context, b *broker.Broker, id string) error {
	p := preparerOf(b)
	l, err := p.claimStore(ctx, b, id, 1)
	if err != nil {
		return err
	}
	p.remove(id, l)
	return nil
}

// ErrIDTaken is errIDTaken.
var ErrIDTaken = errIDTaken

// SetPureLinger changes how long a pure firing's record waits for the
// next one; the returned function restores it.
func SetPureLinger(d time.Duration) (restore func()) {
	old := pureLinger.Swap(int64(d))
	return func() { pureLinger.Store(old) }
}

// KeptInboxes is the subject prefix and the next publish's number of each
// acknowledgement inbox b keeps for its next journals.
func KeptInboxes(b *broker.Broker) (prefixes []string, next []uint64) {
	p := ackPoolOf(b)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, in := range p.free {
		prefixes, next = append(prefixes, in.prefix), append(next, in.next)
	}
	return prefixes, next
}

// AwaitRemoval waits until no store of the ids given is being removed in
// the background by b's preparer (Session.remover).
func AwaitRemoval(ctx context.Context, b *broker.Broker, ids ...string) error {
	return awaitRemoval(ctx, b, ids...)
}

// HoldRemovals makes the removals b's preparer runs in the background
// wait until release (it makes the preparer).
func HoldRemovals(b *broker.Broker) (release func()) {
	p := preparerOf(b)
	hold := make(chan struct{})
	p.mu.Lock()
	p.hold = hold
	p.mu.Unlock()
	return func() { close(hold) }
}

// OnRemovalWait sets a function called when a claim starts waiting for
// the removal of its id; nil removes it.
func OnRemovalWait(f func(id string)) { removalWait.Store(&f) }

// OnClaimSentEarly sets a function called when a new session's claim was
// sent before its lease is taken (claimThen), before the lease is; nil
// removes it.
func OnClaimSentEarly(f func(id string)) { claimSentEarly.Store(&f) }

// HoldJournalWrites stops a durable session's journal from writing until
// release: its writer (and a committer that would send its batch itself)
// waits for the lock every write of the bucket holds. Records queue, and
// no committer is told.
func HoldJournalWrites(s *Session) (release func()) {
	s.jr.wmu.Lock()
	return s.jr.wmu.Unlock
}
