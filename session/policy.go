package session

import "time"

// CheckpointPolicy says when a session writes its checkpoint. The zero
// value writes after every envelope a node consumes or sends (the safest:
// a resume repeats nothing). A sparser policy trades that for fewer writes:
// after a crash, the firings since the last checkpoint run again.
//
// The final checkpoint (the session completed) is always written.
type CheckpointPolicy struct {
	// EveryNodes writes after every N node firings (0: after each).
	EveryNodes int
	// Every also writes when this much time passed since the last write
	// (on the session's clock).
	Every time.Duration
	// OnError writes whenever a node fails, whatever the counters say.
	OnError bool
	// Retain keeps a successful session's checkpoint; without it the
	// checkpoint is removed when the session completes with success (for
	// a durable session, its whole store: stream, journal, artifacts).
	Retain bool
}

// sparse reports whether the policy skips writes.
func (p CheckpointPolicy) sparse() bool { return p.EveryNodes > 1 || p.Every > 0 }

// due decides whether a commit writes the checkpoint: n firings and d time
// since the last write, failed when the committed firing failed, final when
// the session ended.
func (p CheckpointPolicy) due(n int, d time.Duration, failed, final bool) bool {
	switch {
	case final, !p.sparse():
		return true
	case failed && p.OnError:
		return true
	case p.EveryNodes > 0 && n >= p.EveryNodes:
		return true
	case p.Every > 0 && d >= p.Every:
		return true
	}
	return false
}
