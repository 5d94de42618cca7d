// Package actors runs a graph: one protoactor-go actor per node, fed by NATS
// subscriptions on the node's edge subjects and inbox (a durable session: the
// session's one JetStream consumer).
//
// A node actor never blocks in Receive. When an envelope arrives it is
// queued; when the node may fire, the actor starts its handler on a goroutine
// owned by the System (with a context that carries the node's timeout), and
// the outcome comes back to the actor as a message (the mailbox and the
// runner are queues without goroutines of their own, pinned.go: the
// goroutine that hands a firing from one to the other goes on with it when
// nothing else waits, so a hop wakes no goroutine of the node's while
// nothing else arrives; a node's io goroutine that hands a firing's
// output to the next node's actor goes on with that actor's mailbox,
// warmPool.carry; the mailbox is released before the handler runs,
// so the actor stays responsive; in a session that is not durable, a
// runner that finds the mailbox idle once the handler returned claims it
// and applies the outcome itself, as Receive would have with the outcome
// first in its mailbox, without a message). The actor then applies
// the outcome: it updates the token's context and chooses the outgoing edges
// by the node's routing policy (select one edge for pipelines, broadcast for
// parallel nodes and reactive sessions). The firing is then committed to the
// Journal (the checkpoint, given the System's context, which Stop cancels)
// and only then are the next envelopes and events published. With an
// AsyncJournal (a durable session's) the actor hands the record over without
// waiting and the node fires its next input at once — up to maxInflight
// firings ahead of the records stored (node.go); the journal writes the
// records that queued up meanwhile together, and when a firing's record is
// stored the node's io goroutine emits its events, hands its outputs to the
// actors of the nodes that receive them (handOver, durable.go: in process,
// not through the work stream — the record holds them as pending until
// their consumption is recorded, and a resume publishes the pending ones
// to the work stream) and reports back: the firings of one node whose
// records a batch stored are taken by its io goroutine together (settle,
// route.go) and reported in one message (settled); the actor then
// acknowledges the consumed envelopes, so an acknowledged envelope always
// has its firing journaled, and a node only ever receives an envelope
// whose firing is journaled.
// Envelopes consumed without a firing (refused by a budget or limit,
// superseded or dropped by a live edit, a steer held) are recorded the same
// way and acknowledged when their record is stored. Otherwise the commit
// and publications run on the runner goroutine (a Journal that is not
// async) or in place (a session that is not durable: nothing there
// blocks); a session that is not durable hands its outputs for its own
// nodes to their actors in process too (handLocal, system.go), and puts
// on the bus only envelopes for subjects no node of the session reads
// and what a program sends it through Send (Execution.Publish, a steer:
// what follows them on an edge follows them over the bus, busOut and
// busIn); its input and a resume's pending envelopes are handed in
// process as well (Deliver). A durable session reads all its nodes' subjects through one
// JetStream consumer and hands each envelope to its node's mailbox (the
// work stream holds outside input, and the pending envelopes a resume
// publishes again: nothing a node of the session sends another); its work
// stream stores exactly those subjects while there are at most
// broker.MaxListedSubjects of them, and past that the session's own
// broker.Stored subjects, where outside input is stored by the session's
// intake after it checked it (intake.go; narrowStream, at start and at
// every live edit: what an edit adds is stored before anything routes
// there, what it removes once nothing does, a change of mode passes
// through a stream storing both, and a failed edit puts the subjects
// back). A new durable pipeline starts without a work
// stream, in ingress mode: the first outside envelope its intake accepts,
// or ListInbound when it is left unfinished, makes it (lazy.go). An
// envelope on an inbox or edge no node has is refused by the intake
// (stray.go): an envelope.rejected event, a dead letter, and a Refusal as
// the reply to a request.
//
// The durable session's consumer waits a year for an acknowledgement
// (envelopes wait in buffers, joins and gates as long as the graph says),
// so it never sends a delivery again by itself. One the server sent that
// never arrived — on a connection that died, between servers, with a
// consumer leader that went away — is noticed by a gap in the consumer
// sequence of the next delivery (from which on the feed reaches no node),
// or, when nothing follows it, by comparing the server's count of
// deliveries with the feed's after a reconnect, missing pull heartbeats or
// a change of the consumer's leader. The consumer is then re-created from
// its acknowledgement floor; a node recognises by stream sequence what it
// holds (the new delivery's acknowledgement handle replaces the old one)
// and what it consumed (acknowledged again, not fired). See resync.go.
//
// A token's run context travels as deltas (context.go): an envelope a
// firing sends carries the keys the firing set, the envelope whose context
// they are set over (its base) and the lineage's version. The whole context
// stays in process, in the System's context store, under the id of each
// envelope sent; the node that receives the envelope takes it from there,
// as its own map (a chain hands one map down, changed in place, so a hop
// costs what the firing changed, not the context's size). A base not in
// process (after a resume or a takeover) is resolved from the journal
// (Config.Contexts), which holds the whole context of every pending
// envelope; one found nowhere, or at another version, refuses the envelope
// with ErrContext.
//
// Events (Emit) are numbered and published in order by the System's event
// goroutine, and handed to Config.OnEvent. An event that would reach no one
// — a kind Config.Wants says the process does not need, on subjects no NATS
// client subscribes to (Config.Interest) — is dropped at Emit, and a firing
// does not even build its node.started and edge.selected events then
// (System.Wanted).
//
// A panicking handler fails its node with the panic as the failure reason;
// it never takes the process down.
//
// Locks, in the order they may be taken (a lock is only ever acquired while
// holding locks above it, never below; as nats-server's locksordering.txt):
//
//	System.editMu   read: a firing's I/O, from routing to its last publication
//	                (taken on the actor, released on the runner or io
//	                goroutine); write: a live edit swapping the graph
//	Journal         the session's journal locks (session package): its
//	                writer's lock (the bucket's fence, held while records
//	                are written; a committer only tries it, holding the
//	                state lock, to send its record itself when nobody
//	                writes, and never waits for it), then its state
//	                lock (held to queue a record or take a batch, never
//	                while waiting for the store), then its checkpoint file
//	                lock; an AsyncJournal calls done holding at most the
//	                writer's lock
//	meter           a firing's usage meter (meter.mu: what its handler
//	                reports while it runs, charged to its ticket)
//	scheduler       the Scheduler's lock (the journal snapshots its counters);
//	                it calls back (notices) without holding it
//	System.mu       actors (and their pids), subscriptions, the consumer, stopped
//	System.evMu     Emit against Stop closing the event queue
//
// Leaves, taken with nothing else acquired under them: System.routeMu (where a
// durable envelope goes), the dedup windows, the thread table, the context
// store (ctxStore.mu), System.edgeMu (edge names), the warm pool
// (warmPool.mu; a pinned queue's lock is taken before it, and the
// carrier's under it: the carrier is running, so its own lock is never
// held by a Schedule that would reach warmPool.mu), a firing's
// context (firingCtx.mu: only the context package's own locks, its
// parent's and its children's, are taken under it). System.mu is
// never held while calling into an actor, the Journal or NATS, and no lock is
// held while a handler runs.
package actors
