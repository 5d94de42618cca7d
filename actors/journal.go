package actors

import (
	"context"

	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// Commit is one node firing, as the journal records it. The actor calls
// Journal.Commit before it publishes Produced, so that a crash after the
// commit replays the publications (their ids are deterministic, so a replay
// is de-duplicated) and a crash before it re-runs the firing.
type Commit struct {
	Node     string
	Firing   uint64 // the node's firing number, 1-based
	Status   string // the node's final outcome status ("" when it did not run)
	Reason   string // failure reason, if any
	Consumed []string
	Produced []*pb.Envelope
	// Context is the run context of the token after the firing: the whole
	// context when Base is "", else the keys the firing set over the
	// context of envelope Base (one it consumed; see context.go).
	Context []*pb.KV
	Base    string
	// Terminal is set when the firing ends the run (or its token's path).
	Terminal *Terminal
	Usage    *pb.Usage
	// Durable sessions: the stream sequence of each Consumed envelope (0
	// when unknown), and the node's acknowledgement floor before this
	// firing (every envelope it received at or below it was acknowledged).
	// A journal keeps the ids of consumed envelopes above their node's
	// floor: those are the ones JetStream may deliver again after a crash.
	Seqs  []uint64
	Floor uint64
	// Pure: the firing has no effect outside the session (nodes.Pure), it
	// has outputs, and none of its inputs came from the work stream. Its
	// record need not be stored before its outputs go out: a journal may
	// write it with the next record that is waited for, its receiver's
	// (a crash before then runs it again with its receiver, which repeats
	// nothing of its own; and no input of it was acknowledged).
	Pure bool
}

// Terminal ends a token's path through the graph.
type Terminal struct {
	// Status is "success" or "fail".
	Status string
	Reason string
	// Final is true when the whole run ends here, whatever other tokens are
	// live (a failed pipeline, a stop for max iterations).
	Final bool
	// Cause is why a failed run failed, for errors.Is: a scheduler stop
	// (scheduler.ErrBudgetExceeded, ErrMaxIterations, ErrStalled), a node
	// timeout (context.DeadlineExceeded), or nil (the node failed). It is
	// not journaled.
	Cause error
	// Path continues the failed node's id down into a child pipeline: the
	// child's node (and its own child's...) whose failure made this node
	// fail. Not journaled.
	Path []string
	// ChildCause is, when Path is set, the cause code of the child
	// pipeline's failure (session.completed's cause attribute; "" when
	// none), for the session to wrap as this run's cause. Not journaled.
	ChildCause string
}

// Journal records firings. Implementations are called from actor
// goroutines, concurrently for different nodes.
type Journal interface {
	Commit(ctx context.Context, c *Commit) error
}

// ContextKeeper is a Journal that says whether it keeps the run context of
// the commits (Commit.Context). One that does not (a session that is not
// durable and writes no checkpoint file) is given commits whose Context is
// nil where it would be the whole context: a firing from an outside
// envelope (context_base empty) would sort its whole context into a list
// no one reads — two allocations and a sort per event of a reactive
// ingest. A delta over a base is the one the firing's envelopes carry,
// made anyway, and is kept.
type ContextKeeper interface {
	KeepsContext() bool
}

// JournalFunc adapts a function to Journal.
type JournalFunc func(ctx context.Context, c *Commit) error

// Commit calls f.
func (f JournalFunc) Commit(ctx context.Context, c *Commit) error { return f(ctx, c) }

// AsyncJournal is a Journal that records a commit without waiting for the
// store: CommitAsync applies the commit, queues its record and returns;
// done is called once the record is stored (with nil) or cannot be, in the
// order of the commits. It never blocks on I/O, so the node's actor calls
// it on its own goroutine and fires its next input while the record is on
// its way; done may run on the caller's goroutine or the journal's, and
// must not block. A durable session's journal batches the records queued
// meanwhile into one write (session package). Once done is called with
// nil, the journal no longer refers to c or to its Consumed, Seqs and
// Produced lists (the envelopes in Produced it may keep): the firing's
// job, which holds them, is reused (a record a sparse policy holds past
// done keeps copies of them). Its Context it may keep.
type AsyncJournal interface {
	Journal
	CommitAsync(ctx context.Context, c *Commit, done func(error))
}
