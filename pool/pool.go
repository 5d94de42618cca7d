// Package pool runs node work on worker processes: the firings of a node
// with a pool attribute (or type="remote") become jobs on a JetStream
// work-queue stream, any process that follows the worker protocol
// (docs/workers.md) pulls them, and the outcome returns to the session's
// owner, which commits it as it commits a local firing.
//
// The owner side is Dispatcher (a nodes.Handler per pool, so the scheduler,
// retries, budgets and the journal stay where they are); the worker side is
// Worker (what `switchyard worker` runs).
//
// Protocol, in short:
//   - stream SY_WORK, work-queue retention, one subject per attempt,
//     syw.<pool>.<session>.<node>.<firing>.<attempt>; bounded (MaxMsgs,
//     MaxBytes, discard new) and trimmed as jobs are acked;
//   - each pool has one durable pull consumer, pool_<pool>, shared by its workers;
//   - a job is an Envelope (kind "job", id = the attempt id, to_node, context,
//     payload.message = the prompt, payload.structured.messages = the inputs,
//     metadata attempt/graph/node_type/pool), protobuf or, when the node sets
//     work_format="json", protojson;
//   - its header Sy-Reply names the subject the outcome goes to
//     (syo.<session>.<node>.<firing>.<attempt>.<tag>, the tag an HMAC of the
//     attempt with the session's key: not guessable): an Envelope
//     (kind "outcome", id = the job's id, outcome, payload.message = the
//     response, context_updates, usage), protobuf or protojson;
//   - long work sends in-progress acks (+WPI) before AckWait; the job is acked
//     after the outcome is published. A job whose worker dies is redelivered
//     after AckWait with the same id; the owner commits the first outcome for
//     an attempt and discards any later one;
//   - outcomes are kept by stream SYW_OUTCOMES (subjects syo.>, the last per
//     subject): the owner looks its attempt's outcome up there before it
//     queues the job, so an owner that took the session over while the job
//     ran (or after it ended) commits that outcome instead of running the
//     job again;
//   - a job is queued again only when neither holds it: the owner looks up
//     its attempt's subject in SY_WORK (a job stays there, queued or
//     running, until a worker acks it, which a worker does only once its
//     outcome is stored), then the outcome, then publishes. A job is never
//     run twice while a copy of it is queued or running, however long it
//     runs: the stream's duplicate window (2 minutes) no longer matters;
//   - a new session (Dispatcher.Fresh: not a resume, not a takeover) purges
//     its id's subjects from both streams before its first job
//     (Dispatcher.Forget): what an earlier session of the same id left is
//     not run, waited on or committed as its own.
package pool

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/graph"
)

// Names of the protocol's resources.
const (
	// Stream is the work-queue stream every pool's jobs are stored in.
	Stream = "SY_WORK"
	// OutcomeStream keeps every outcome published on syo.> (one per
	// attempt's reply subject), so that an owner that takes a session over
	// finds the outcome of a job that ended while nobody owned it.
	OutcomeStream = "SYW_OUTCOMES"
	// GraphBucket is the KV bucket holding the graphs jobs refer to, by the
	// SHA-256 of their canonical DOT (metadata key "graph").
	GraphBucket = "sy_work_graphs"
	// ReplyHeader names the subject a job's outcome is published to.
	ReplyHeader = "Sy-Reply"
	// KindJob and KindOutcome are the envelope kinds of the protocol.
	KindJob     = "job"
	KindOutcome = "outcome"
	// DefaultPool is the pool of a type="remote" node that names none, and
	// of a worker started without --pool.
	DefaultPool = "default"
	// TypeRemote is the node type whose work is always done by a worker.
	TypeRemote = graph.TypeRemote
)

// The ways a pool's jobs reach workers (node attribute work_mode).
const (
	// ModeQueue (default): the work-queue stream, pulled, acked, redelivered.
	ModeQueue = "queue"
	// ModeRequest: a core NATS request on syr.<pool>.<session>.<node>
	// answered by any responder (nats reply, a service); no redelivery.
	ModeRequest = "request"
)

// RequestTimeout is how long a work_mode=request job waits for its reply
// when the node sets no timeout.
const RequestTimeout = 10 * time.Minute

// RequestSubject is the subject a work_mode=request job is sent on.
func RequestSubject(pool, session, node string) string {
	return "syr." + pool + "." + session + "." + node
}

// Limits of the work stream: past them a new job is refused (the firing
// fails saying so), never an old one dropped.
const (
	MaxJobs     = 100_000
	MaxJobBytes = 1 << 30
)

// MaxOutcomeAge bounds how long the outcome stream keeps an outcome. An
// outcome is needed until its session's owner (or the owner that takes the
// session over) committed it; the stream keeps it per attempt, with no
// count shared by every session (a busy deployment would trim the outcome
// of a job another session may still queue again), and a session's
// outcomes are purged when it finishes (ForgetOutcomes). The age is the
// outer bound for a running session: an outcome stored while its session
// had no owner for longer than that is lost, and its job runs again when
// the session resumes.
const MaxOutcomeAge = 7 * 24 * time.Hour

// JobSubject is the subject the job of one attempt of a firing of node is
// published on: one per attempt, so that an owner finds out whether the
// work stream still holds that attempt's job (by subject: the last message
// on it) before it queues the job again.
func JobSubject(pool, session, node string, firing uint64, attempt int) string {
	return fmt.Sprintf("syw.%s.%s.%s.%d.%d", pool, session, node, firing, attempt)
}

// PoolSubjects are the subjects of every job of a pool.
func PoolSubjects(pool string) string { return "syw." + pool + ".>" }

// ConsumerName is the durable consumer a pool's workers share.
func ConsumerName(pool string) string { return "pool_" + pool }

// ReplySubject is where the outcome of one attempt of a firing returns: it
// depends only on the attempt, so the owner that takes a session over hears
// the outcome of a job its predecessor published.
func ReplySubject(session, node string, firing uint64, attempt int) string {
	return fmt.Sprintf("syo.%s.%s.%d.%d", session, node, firing, attempt)
}

// ReplyTag is the last token of an attempt's reply subject when the owner
// has a key (Dispatcher.Key): 16 hex digits of an HMAC-SHA256 of the
// attempt id. Attempt ids are guessable; the tag is not, so an outcome
// can only be published where the owner listens (and kept where a new
// owner looks) by whoever was given the job.
func ReplyTag(key []byte, attemptID string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("syo\x00" + attemptID))
	return hex.EncodeToString(m.Sum(nil)[:8])
}

// Of is the pool a node's firings go to, "" when they run in the owner.
func Of(n *graph.Node) string {
	p := n.Attrs.String("pool")
	if p == "" && n.Attrs.String("type") == TypeRemote {
		p = DefaultPool
	}
	return p
}

// CheckName refuses a pool name that would not make a subject token.
func CheckName(pool string) error {
	if !broker.ValidToken(pool) {
		return fmt.Errorf("pool %q: want letters, digits, '_' and '-'", pool)
	}
	return nil
}
