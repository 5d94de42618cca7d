package broker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard/switchyard/internal/crash"
)

// Storage chooses where JetStream keeps a session's resources.
type Storage int

// Storage kinds.
const (
	// FileStorage keeps resources on disk: they survive a restart.
	FileStorage Storage = iota
	// MemoryStorage keeps resources in memory (tests).
	MemoryStorage
)

func (s Storage) js() jetstream.StorageType {
	if s == MemoryStorage {
		return jetstream.MemoryStorage
	}
	return jetstream.FileStorage
}

// Option configures the resources a session creates.
type Option func(*options)

type options struct {
	replicas int
	inbound  []string
	fresh    bool
	only     bool
	made     *bool
	dupes    time.Duration
	ingress  bool
	// shared: a fresh session goes to the shared bucket (InShared);
	// generated: its id is new (Generated).
	shared    jetstream.KeyValue
	generated bool
	// claims: the caller's first writes in the shared bucket tell whether
	// the session is there (Claims).
	claims bool
	// on: the broker whose server the lookups may skip a request on
	// (LookupsOn).
	on *Broker
}

// LookupsOn lets SessionKV skip the lookup of a session's own bucket when
// b's server shows it absent (Broker.Unheard).
func LookupsOn(b *Broker) Option { return func(o *options) { o.on = b } }

// Replicas asks for n copies of each resource (streams, KV buckets, the
// object store) on a JetStream cluster: 3 survives the loss of one server
// (1 on an embedded server, which is alone). A resource that exists with
// more replicas keeps them: starting or resuming a session never scales
// its store down.
func Replicas(n int) Option { return func(o *options) { o.replicas = n } }

// Inbound gives EnsureSessionStream the inbound subjects of the session's
// graph (its nodes' inboxes and edges): the work stream then stores the
// subjects WorkSubjects gives for them — those subjects only, or, past
// MaxListedSubjects of them, the session's Stored subjects.
func Inbound(subjects []string) Option {
	return func(o *options) { o.inbound = subjects }
}

// Ingress makes EnsureSessionStream store the session's Stored subjects
// only, whatever its graph (what WorkSubjects gives past
// MaxListedSubjects): a store made before its graph is known (a session's
// prepared store), whose outside input goes through the serving session's
// intake until SetInbound lists its subjects.
func Ingress() Option { return func(o *options) { o.ingress = true } }

// Duplicates sets the work stream's duplicate window (0:
// DefaultDuplicateWindow): Broker.DuplicateWindow gives the store's.
func Duplicates(d time.Duration) Option { return func(o *options) { o.dupes = d } }

// Fresh says the resources are expected not to exist yet (a session being
// created): each is created in one request, without first reading what
// exists and trying an update — two round trips fewer per resource, out of
// the few milliseconds a session's creation costs. One that does exist
// with another configuration is then updated as without the option.
func Fresh() Option { return func(o *options) { o.fresh = true } }

// CreateOnly makes a stream that does not exist, and leaves one that does
// as it is: the call fails with jetstream.ErrStreamNameAlreadyInUse. For a
// creation sent before the caller knows it may change what exists under
// the name (a new session's work stream, made while its bucket is).
func CreateOnly() Option { return func(o *options) { o.fresh, o.only = true, true } }

// Made sets *made when the resource was made by the call (it did not
// exist): a bucket made so is empty.
func Made(made *bool) Option { return func(o *options) { o.made = made } }

func newOptions(opts []Option) options {
	o := options{}
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	return o
}

// replicasFor is how many replicas stream should have: what was asked
// for, or what it has when it exists with more.
func (o options) replicasFor(ctx context.Context, js jetstream.JetStream, stream string) int {
	want := max(o.replicas, 1)
	if s, err := js.Stream(ctx, stream); err == nil {
		if info := s.CachedInfo(); info != nil && info.Config.Replicas > want {
			want = info.Config.Replicas
		}
	}
	return want
}

// ensureStream creates, or updates to cfg, a stream; its replicas are
// replicasFor's (Fresh: what was asked for, unless it exists).
func (o options) ensureStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	if o.fresh {
		cfg.Replicas = max(o.replicas, 1)
		s, err := placed(ctx, func() (jetstream.Stream, error) { return js.CreateStream(ctx, cfg) })
		if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) || o.only {
			return s, err
		}
	}
	cfg.Replicas = o.replicasFor(ctx, js, cfg.Name)
	return placed(ctx, func() (jetstream.Stream, error) { return js.CreateOrUpdateStream(ctx, cfg) })
}

// DefaultDuplicateWindow is how long a work stream remembers a Nats-Msg-Id
// (the envelope id) to drop a second publication of it, unless
// Config.DuplicateWindow says otherwise (the Duplicates option).
const DefaultDuplicateWindow = 2 * time.Minute

// DefaultMaxHeld is how many envelopes a durable session holds delivered
// and unacknowledged at most, unless Config.MaxHeld says otherwise: 2^20,
// about a gigabyte of a process's memory when all are held, so that no
// healthy session waits for its own nodes by default.
const DefaultMaxHeld = 1 << 20

// MinMaxHeld is the lowest Config.MaxHeld: room for a node's firings on
// their way to its journal (actors' in-flight bound) and a join's inputs.
const MinMaxHeld = 1024

// MinDuplicateWindow is the shortest window the server accepts.
const MinDuplicateWindow = 100 * time.Millisecond

// Default retention of the event stream.
const (
	DefaultEventMaxMsgs = 100_000
	DefaultEventMaxAge  = 24 * time.Hour
)

// Bound of a session's dead letters (sy.<session>.dlq, stream
// DeadLetterStreamName): the newest DeadLetterMaxMsgs, none older than
// DeadLetterMaxAge, the oldest discarded first.
const (
	DeadLetterMaxMsgs = 10_000
	DeadLetterMaxAge  = 7 * 24 * time.Hour
)

// MaxListedSubjects is the most inbound subjects a work stream lists one
// by one (WorkSubjects). nats-server checks a stream's subjects against
// each other pairwise, and against every other stream's of the account,
// under its JetStream API lock, at every create and update: measured on 2
// cores, 512 subjects take 30-80 ms, 1,024 take 0.3-0.9 s, 20,000 (10,000
// nodes, each with an inbox and an incoming edge) 22-24 s, during which
// every JetStream request of the server waits. Several streams would not
// help: the check across streams is pairwise too.
const MaxListedSubjects = 512

// WorkSubjects is the subject list of a session's work stream for the
// inbound subjects of its graph (its nodes' inboxes and edges), and
// whether outside input then passes through the serving session
// (ingress). This is the one place the mode is chosen:
//
//   - up to MaxListedSubjects inbound subjects: those subjects, sorted.
//     Outside publishers and the session's nodes publish on them, the
//     stream stores them directly (also while no process serves the
//     session), and a publish on any other subject of the session is
//     stored by no stream: the serving session refuses it (a JetStream
//     publisher gets the refusal as its reply).
//   - past it: the session's own subject space AllStored, one wildcard
//     (ingress true). The nodes publish under Stored subjects; outside
//     publishers still publish on the inboxes and edges, which no stream
//     stores: the serving session takes them on core NATS (a queue
//     group), checks them, refuses what its graph does not have, and
//     stores the rest under Stored subjects with the publisher's reply
//     subject and Nats-Msg-Id, so the publisher's acknowledgement is the
//     stream's own, sent once the envelope is stored. While no process
//     serves the session, such a publish gets no answer ("no responders"):
//     a durable publisher publishes again until one does.
//   - no inbound subjects (a store made without Inbound, or by an older
//     version): every inbox and edge of the session, stored directly.
func WorkSubjects(session string, inbound []string) (subjects []string, ingress bool) {
	if len(inbound) == 0 {
		return []string{root + "." + session + ".edge.>", root + "." + session + ".node.*.in"}, false
	}
	if len(inbound) > MaxListedSubjects {
		return []string{AllStored(session)}, true
	}
	out := append([]string(nil), inbound...)
	slices.Sort(out)
	return slices.Compact(out), false
}

// WorkStreamDescription is the description a session's work stream is
// made with: what tells it from the other streams whose names start as
// its does (an event stream, the pools' work stream).
func WorkStreamDescription(session string) string {
	return "switchyard session " + session + ": edges, inboxes"
}

// SessionOfStream is the session whose work stream or object store's
// stream a stream is, told by its name and by the description it was made
// with (other streams have names like theirs: an event stream, the pools'
// work stream, a client's); ok false for any other.
func SessionOfStream(name, description string) (session string, ok bool) {
	if id, ok := strings.CutPrefix(name, "OBJ_"+ObjectsName("")); ok && ValidToken(id) && description == objectsDescription(id) {
		return id, true
	}
	if id, ok := strings.CutPrefix(name, StreamName("")); ok && ValidToken(id) && description == WorkStreamDescription(id) {
		return id, true
	}
	return "", false
}

// objectsDescription is the description a session's object store is made
// with.
func objectsDescription(session string) string {
	return "switchyard session " + session + ": artifacts"
}

// StreamName is the name of a session's work stream: SY_<session>.
func StreamName(session string) string { return "SY_" + session }

// EventStreamName is the name of a session's event stream: SY_<session>_EVT.
func EventStreamName(session string) string { return "SY_" + session + "_EVT" }

// DeadLetterStreamName is the name of a session's dead-letter stream:
// SYDLQ_<session> (no work or event stream name starts so, whatever the
// session id).
func DeadLetterStreamName(session string) string { return "SYDLQ_" + session }

// KVName is the name of a session's key-value bucket: sy_kv_<session>.
func KVName(session string) string { return "sy_kv_" + session }

// ObjectsName is the name of a session's object store: sy_obj_<session>.
func ObjectsName(session string) string { return "sy_obj_" + session }

// checkSession rejects session ids that would make invalid subjects or
// resource names. ValidToken ids contain only letters, digits, '_' and '-',
// all valid in stream and bucket names.
func checkSession(session string) error {
	if !ValidToken(session) {
		return fmt.Errorf("broker: invalid session id %q", session)
	}
	return ReservedSession(session)
}

// ReservedSession refuses a session id whose work stream would be another
// stream of the store: SY_WORK (the pools' work queue) or SY_<x>_EVT
// (session x's event stream).
func ReservedSession(session string) error {
	if session == "WORK" || strings.HasSuffix(session, "_EVT") {
		return fmt.Errorf("broker: session id %q is reserved: its stream %s would be another stream of the store", session, StreamName(session))
	}
	return nil
}

// EnsureSessionStream creates, or updates to this configuration, the
// session's work stream SY_<session>: its edges and node inboxes, with a
// duplicate window (the Duplicates option, DefaultDuplicateWindow without
// it) for Nats-Msg-Id de-duplication. With the Inbound option
// the stream stores the subjects WorkSubjects gives for them (SetInbound
// changes them on a live edit); without it, every edge and inbox of the
// session. Its dead-letter stream (EnsureDeadLetters) is not made here: a
// session makes it before its first dead letter (most never have one, and
// each file-backed stream costs the server milliseconds to make and to
// remove). It comes after the work stream, whose update here takes the
// dead letters' subject out of the work stream of a store of an earlier
// version (what that one kept there stays until the session is removed).
//
// Dead letters are a stream of their own because their bound is not the
// work's: the work stream must never drop what a node has not consumed
// (it is trimmed below the nodes' acknowledgement floors), while refused
// envelopes are kept for inspection, newest first, up to a count and an
// age. A per-subject limit on the work stream (MaxMsgsPerSubject) cannot
// say that: it would apply to every edge subject too.
//
// Control subjects (sy.<session>.ctl.>) are not in it: trigger and explain
// are requests answered by the running session, and a stream capturing
// them would answer first, with its publish acknowledgement.
//
// Events (sy.<session>.evt.>) are deliberately not in it. The work stream
// holds what the session must not lose and replays on resume; events are a
// high-volume live feed that nothing replays to recover. Storing them there
// would put a disk write on every step of the hot path and let a session
// that runs for days grow its work stream without bound. A front end that
// wants recent history asks for the separate, bounded EnsureEventStream.
func EnsureSessionStream(ctx context.Context, js jetstream.JetStream, session string, st Storage, opts ...Option) (jetstream.Stream, error) {
	if err := checkSession(session); err != nil {
		return nil, err
	}
	o := newOptions(opts)
	subjects, _ := WorkSubjects(session, o.inbound)
	if o.ingress {
		subjects = []string{AllStored(session)}
	}
	s, err := o.ensureStream(ctx, js, jetstream.StreamConfig{
		Name:        StreamName(session),
		Description: WorkStreamDescription(session),
		Subjects:    subjects,
		Storage:     st.js(),
		Duplicates:  cmp.Or(o.dupes, DefaultDuplicateWindow),
	})
	if err != nil {
		return nil, fmt.Errorf("broker: stream %s: %w", StreamName(session), err)
	}
	return s, nil
}

// SetInbound changes the subjects of the session's existing work stream to
// WorkSubjects(session, inbound), keeping the rest of its configuration
// (replicas among it); ingress says which mode that is. The messages the
// stream holds stay, also on subjects it no longer stores. An update that
// changes nothing is not sent.
//
// When the mode changes, the stream first stores its old and its new
// subjects, then switched (when not nil) is called with the new mode,
// then the stream keeps the new subjects only: a publisher that learned
// the mode before the change still finds its envelope stored. Kill points
// inbound-both, inbound-switched and inbound-set follow the three steps of
// a change of mode (cmd/switchyard TestCrashQueueModeSwitch).
func SetInbound(ctx context.Context, js jetstream.JetStream, session string, inbound []string, switched func(ingress bool)) (ingress bool, err error) {
	if err := checkSession(session); err != nil {
		return false, err
	}
	subjects, ingress := WorkSubjects(session, inbound)
	// The stream's configuration is looked up once; an update answers
	// with the configuration it made, which the next step starts from.
	var cfg *jetstream.StreamConfig
	set := func(subjects func(old []string) []string) error {
		return Retry(ctx, 10*time.Second, func(ctx context.Context) error {
			if cfg == nil {
				s, err := js.Stream(ctx, StreamName(session))
				if err != nil {
					return err
				}
				c := s.CachedInfo().Config
				cfg = &c
			}
			want := subjects(cfg.Subjects)
			if slices.Equal(cfg.Subjects, want) {
				return nil
			}
			next := *cfg
			next.Subjects = want
			s, err := js.UpdateStream(ctx, next)
			if err != nil {
				cfg = nil // looked up again by a retry
				return err
			}
			c := s.CachedInfo().Config
			cfg = &c
			return nil
		})
	}
	flip := false
	err = set(func(old []string) []string {
		if slices.Contains(old, AllStored(session)) == ingress {
			return old // no change of mode
		}
		flip = true
		both := append(slices.Clone(old), subjects...)
		slices.Sort(both)
		return slices.Compact(both)
	})
	if err == nil {
		if flip {
			crash.Point("inbound-both") // the stream stores both kinds of subject; the session's mode not switched yet
		}
		if switched != nil {
			switched(ingress)
		}
		if flip {
			crash.Point("inbound-switched") // the mode switched; the stream still stores both
		}
		err = set(func([]string) []string { return subjects })
		if flip && err == nil {
			crash.Point("inbound-set") // the stream stores the new mode's subjects only
		}
	}
	if err != nil {
		return false, fmt.Errorf("broker: stream %s: subjects: %w", StreamName(session), err)
	}
	return ingress, nil
}

// InboundSet reports whether a work stream whose subjects are current
// already stores what SetInbound(session, inbound) would set, and the
// mode that is (SetInbound would send nothing).
func InboundSet(session string, inbound, current []string) (ingress, set bool) {
	subjects, ingress := WorkSubjects(session, inbound)
	return ingress, slices.Equal(subjects, current)
}

// EnsureDeadLetters creates, or updates to this configuration, the
// session's dead-letter stream SYDLQ_<session> on sy.<session>.dlq: at
// most DeadLetterMaxMsgs messages, none older than DeadLetterMaxAge; when
// full, the oldest go. It sets no byte limit: JetStream reserves a
// stream's MaxBytes in the account's storage up front, which a small
// store cannot give (bytes are bounded by the count times the server's
// max_payload).
func EnsureDeadLetters(ctx context.Context, js jetstream.JetStream, session string, st Storage, opts ...Option) (jetstream.Stream, error) {
	if err := checkSession(session); err != nil {
		return nil, err
	}
	o := newOptions(opts)
	name := DeadLetterStreamName(session)
	s, err := o.ensureStream(ctx, js, jetstream.StreamConfig{
		Name:        name,
		Description: "switchyard session " + session + ": dead letters (refused envelopes), newest kept",
		Subjects:    []string{DeadLetter(session)},
		Storage:     st.js(),
		MaxMsgs:     DeadLetterMaxMsgs,
		MaxAge:      DeadLetterMaxAge,
		Discard:     jetstream.DiscardOld,
	})
	if err != nil {
		return nil, fmt.Errorf("broker: stream %s: %w", name, err)
	}
	return s, nil
}

// EventRetention bounds a session's event stream; zero fields take the
// defaults (DefaultEventMaxMsgs, DefaultEventMaxAge). The oldest events are
// discarded first.
type EventRetention struct {
	MaxMsgs int64
	MaxAge  time.Duration
}

// EnsureEventStream creates, or updates, the session's bounded event
// stream SY_<session>_EVT over sy.<session>.evt.>, for front ends that
// replay recent events (a watch started late). It is optional: events are
// published and read on core NATS whether or not it exists.
func EnsureEventStream(ctx context.Context, js jetstream.JetStream, session string, st Storage, r EventRetention, opts ...Option) (jetstream.Stream, error) {
	if err := checkSession(session); err != nil {
		return nil, err
	}
	o := newOptions(opts)
	if r.MaxMsgs <= 0 {
		r.MaxMsgs = DefaultEventMaxMsgs
	}
	if r.MaxAge <= 0 {
		r.MaxAge = DefaultEventMaxAge
	}
	s, err := placed(ctx, func() (jetstream.Stream, error) {
		return js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
			Name:        EventStreamName(session),
			Description: "switchyard session " + session + ": recent events",
			Subjects:    []string{AllEvents(session)},
			Storage:     st.js(),
			MaxMsgs:     r.MaxMsgs,
			MaxAge:      r.MaxAge,
			Discard:     jetstream.DiscardOld,
			Replicas:    o.replicasFor(ctx, js, EventStreamName(session)),
		})
	})
	if err != nil {
		return nil, fmt.Errorf("broker: stream %s: %w", EventStreamName(session), err)
	}
	return s, nil
}

// SessionKV creates or opens the session's bucket for checkpoints and
// node state (16 revisions kept per key): its own, or its keys in the
// shared bucket (SharedName) — where InShared places a fresh session
// (unless, under an id that is not Generated, the store holds a session
// of that id already: that one is the session), and where a session
// placed so is found again (a resume, or a start under an id that is not
// Generated: the one there is the session).
func SessionKV(ctx context.Context, js jetstream.JetStream, session string, st Storage, opts ...Option) (*SessionBucket, error) {
	if err := checkSession(session); err != nil {
		return nil, err
	}
	o := newOptions(opts)
	if o.fresh && o.shared != nil {
		b := &SessionBucket{KV: o.shared, Prefix: session + "."}
		if !o.generated {
			// An id of the caller's: a session the store holds under it
			// is that session, in the shared bucket or in its own. Both
			// are asked at once (a round trip, not two); the shared
			// bucket not at all when the caller's claim tells (Claims).
			var own jetstream.KeyValue
			var ownErr error
			var sharedErr error = jetstream.ErrKeyNotFound // the caller's claim tells (Claims)
			lookups := []func() error{func() error {
				if o.on != nil && o.on.Unheard("$KV."+KVName(session)+"."+OwnerKey) {
					ownErr = jetstream.ErrBucketNotFound // no such stream on the server
					return nil
				}
				own, ownErr = js.KeyValue(ctx, KVName(session))
				return nil
			}}
			if !o.claims {
				lookups = append(lookups, func() error {
					_, sharedErr = b.Get(ctx, OwnerKey)
					return nil
				})
			}
			_ = parallel(lookups...) // one runs on this goroutine
			switch {
			case sharedErr == nil:
				return b, nil
			case !errors.Is(sharedErr, jetstream.ErrKeyNotFound):
				return nil, fmt.Errorf("broker: bucket %s: %w", SharedName, sharedErr)
			case ownErr == nil:
				return OwnBucket(own), nil
			case !errors.Is(ownErr, jetstream.ErrBucketNotFound):
				return nil, fmt.Errorf("broker: bucket %s: %w", KVName(session), ownErr)
			}
		}
		if o.made != nil {
			*o.made = true
		}
		return b, nil
	}
	if !o.fresh || !o.generated {
		b, err := findShared(ctx, js, session)
		if err != nil {
			return nil, fmt.Errorf("broker: bucket %s: %w", SharedName, err)
		}
		if b != nil {
			return b, nil
		}
	}
	cfg := jetstream.KeyValueConfig{
		Bucket: KVName(session), Description: "switchyard session " + session + ": checkpoints and node state",
		Storage: st.js(), History: 16,
	}
	var kv jetstream.KeyValue
	var err error = jetstream.ErrBucketExists
	if o.fresh {
		cfg.Replicas = max(o.replicas, 1)
		kv, err = placed(ctx, func() (jetstream.KeyValue, error) { return js.CreateKeyValue(ctx, cfg) })
		if err == nil && o.made != nil {
			*o.made = true
		}
	}
	if errors.Is(err, jetstream.ErrBucketExists) {
		cfg.Replicas = o.replicasFor(ctx, js, "KV_"+KVName(session))
		kv, err = placed(ctx, func() (jetstream.KeyValue, error) { return js.CreateOrUpdateKeyValue(ctx, cfg) })
	}
	if err != nil {
		return nil, fmt.Errorf("broker: bucket %s: %w", KVName(session), err)
	}
	return OwnBucket(kv), nil
}

// SessionObjects creates or opens the session's object store for artifacts.
func SessionObjects(ctx context.Context, js jetstream.JetStream, session string, st Storage, opts ...Option) (jetstream.ObjectStore, error) {
	if err := checkSession(session); err != nil {
		return nil, err
	}
	o := newOptions(opts)
	obj, err := placed(ctx, func() (jetstream.ObjectStore, error) {
		return js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
			Bucket: ObjectsName(session), Description: objectsDescription(session),
			Storage: st.js(), Replicas: o.replicasFor(ctx, js, "OBJ_"+ObjectsName(session)),
		})
	})
	if err != nil {
		return nil, fmt.Errorf("broker: object store %s: %w", ObjectsName(session), err)
	}
	return obj, nil
}

// DeleteOption tells DeleteSession what its caller knows does not exist:
// requests fewer (they overlap, but the server answers a few at a time —
// as many as it has cores).
type DeleteOption func(*deleteOptions)

type deleteOptions struct {
	notArchived, leaseGone, noDeadLetters, noWorkStream, noEvents, noObjects bool
	// own: the session has a bucket of its own (not in the shared one);
	// shared: its keys are in the shared bucket (no bucket of its own),
	// whose stream is sharedStream when the caller has it.
	own, shared  bool
	sharedStream jetstream.Stream
	// anchor: write the shared bucket's anchor before the purge
	// (AnchorShared).
	anchor bool
}

// OwnBucketOnly says the session has a bucket of its own, so nothing of it
// is in the shared bucket: a request fewer.
func OwnBucketOnly() DeleteOption { return func(o *deleteOptions) { o.own = true } }

// SharedBucketOnly says the session's keys are in the shared bucket
// (SharedName), so it has no bucket of its own: a request fewer; and
// another when the caller gives the bucket's stream (nil: looked up).
func SharedBucketOnly(stream jetstream.Stream) DeleteOption {
	return func(o *deleteOptions) { o.shared, o.sharedStream = true, stream }
}

// AnchorShared has the shared bucket's anchor — a key of no session —
// written before the session's keys are purged from it, so that the purge
// does not leave the bucket's stream empty (the server then removes its
// last block file and makes another for the next write). For a session
// whose keys were likely the bucket's last writes: a named pipeline, with
// no store prepared after it.
func AnchorShared() DeleteOption { return func(o *deleteOptions) { o.anchor = true } }

// NotArchived says the archive holds nothing of the session (three
// requests fewer): the process that created it and ran it to its end
// knows — a session is archived once it completed, by its owner or by a
// collection when it has none, and an id the archive holds cannot be
// created again.
func NotArchived() DeleteOption { return func(o *deleteOptions) { o.notArchived = true } }

// NoDeadLetters says the session has no dead-letter stream (its owner
// makes it before the first dead letter, and a session made and run to its
// end by the caller had none): a request fewer.
func NoDeadLetters() DeleteOption { return func(o *deleteOptions) { o.noDeadLetters = true } }

// NoWorkStream says the session has no work stream (a durable pipeline
// made without one that no outside input came to, run to its end by the
// caller): a request fewer.
func NoWorkStream() DeleteOption { return func(o *deleteOptions) { o.noWorkStream = true } }

// NoEventStream says the session has no event stream the removal should
// delete: the runtime makes none — EnsureEventStream is for a client that
// wants a session's recent events kept, bounded by age and count, and
// that client's to delete: a request fewer.
func NoEventStream() DeleteOption { return func(o *deleteOptions) { o.noEvents = true } }

// NoObjects says the session has no object store: its owner made it, with
// one replica (a replicated session's store is made with it), stored no
// artifact, sent no pool job and took no outside input — the only ways one
// is made. A store a client made for it anyway (an upload whose envelope
// never reached the session) is left to the collection of stores no
// session recorded: a request fewer.
func NoObjects() DeleteOption { return func(o *deleteOptions) { o.noObjects = true } }

// LeaseLeft says the caller holds the session's lease and releases it
// itself once the removal is done: DeleteSession leaves it. Released
// before, the lease would let another process claim the id while its
// store is being removed, and the removal delete what that claim wrote.
func LeaseLeft() DeleteOption { return func(o *deleteOptions) { o.leaseGone = true } }

// DeleteSession removes the session's work stream, event stream, KV bucket
// (or its keys in the shared bucket), object store, what the archive holds
// of it, and its lease. Resources
// that do not exist are not an error. The resources are deleted at once
// (their round trips overlap), the lease last.
func DeleteSession(ctx context.Context, js jetstream.JetStream, session string, opts ...DeleteOption) error {
	if err := checkSession(session); err != nil {
		return err
	}
	del := func(what string, f func() error) func() error {
		return func() error {
			if err := f(); err != nil && !notFound(err) {
				return fmt.Errorf("broker: delete %s: %w", what, err)
			}
			return nil
		}
	}
	var o deleteOptions
	for _, f := range opts {
		f(&o)
	}
	var fs []func() error
	var names []string
	if !o.noEvents {
		names = append(names, EventStreamName(session))
	}
	if !o.noWorkStream {
		names = append(names, StreamName(session))
	}
	if !o.noDeadLetters {
		names = append(names, DeadLetterStreamName(session))
	}
	for _, name := range names {
		fs = append(fs, del("stream "+name, func() error { return js.DeleteStream(ctx, name) }))
	}
	if !o.shared {
		fs = append(fs, del("bucket "+KVName(session), func() error { return js.DeleteKeyValue(ctx, KVName(session)) }))
	}
	if !o.own {
		fs = append(fs, del("keys of "+session+" in bucket "+SharedName, func() error { return purgeShared(ctx, js, session, o.sharedStream, o.anchor) }))
	}
	if !o.noObjects {
		fs = append(fs,
			del("object store "+ObjectsName(session), func() error { return js.DeleteObjectStore(ctx, ObjectsName(session)) }))
	}
	if !o.notArchived {
		fs = append(fs, del("archive of "+session, func() error { return deleteArchived(ctx, js, session) }))
	}
	errs := []error{parallel(fs...)}
	if o.leaseGone {
		return errors.Join(errs...)
	}
	if kv, err := js.KeyValue(ctx, LeaseBucket); err == nil {
		if err := kv.Purge(ctx, session); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			errs = append(errs, fmt.Errorf("broker: delete lease of %s: %w", session, err))
		}
	}
	return errors.Join(errs...)
}

func notFound(err error) bool {
	return errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound)
}

// String is "file" or "memory".
func (s Storage) String() string {
	if s == MemoryStorage {
		return "memory"
	}
	return "file"
}

// LeaseBucket is the KV bucket of session leases: one key per session id
// whose value names the process that runs it (see package session).
const LeaseBucket = "sy_leases"

// LeaseMaxAge is how long the lease bucket keeps a message. An owner
// renews its lease several times a TTL (seconds), so what ages out is what
// nobody writes any more: the marker a released or purged lease leaves,
// one per session ever run, which nats-server would otherwise recover at
// every start of the store, for good. A lease's TTL must stay well below
// it (session refuses a TTL above a third of it).
const LeaseMaxAge = 24 * time.Hour

// AgeLeases gives the lease bucket of a store made before LeaseMaxAge its
// maximum age (a collection calls it; Leases makes new buckets with it).
func AgeLeases(ctx context.Context, js jetstream.JetStream) error {
	s, err := js.Stream(ctx, "KV_"+LeaseBucket)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("broker: bucket %s: %w", LeaseBucket, err)
	}
	cfg := s.CachedInfo().Config
	if cfg.MaxAge == LeaseMaxAge {
		return nil
	}
	cfg.MaxAge = LeaseMaxAge
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("broker: bucket %s: %w", LeaseBucket, err)
	}
	return nil
}

// Leases creates or opens the lease bucket.
func Leases(ctx context.Context, js jetstream.JetStream, st Storage, opts ...Option) (jetstream.KeyValue, error) {
	o := newOptions(opts)
	// Each lookup is bounded and made again while it goes unanswered: an
	// API request whose answer was lost (a server of the cluster
	// restarted) otherwise waited for as long as ctx allowed — a resume
	// after a server restart hung for minutes in TestClusterReplicas.
	var kv jetstream.KeyValue
	err := Retry(ctx, 5*time.Second, func(ctx context.Context) error {
		var err error
		kv, err = js.KeyValue(ctx, LeaseBucket)
		return err
	})
	if err == nil {
		if o.replicas <= 1 {
			return kv, nil
		}
		var s jetstream.Stream
		err := Retry(ctx, 5*time.Second, func(ctx context.Context) error {
			var err error
			s, err = js.Stream(ctx, "KV_"+LeaseBucket)
			return err
		})
		if err == nil && s.CachedInfo().Config.Replicas >= o.replicas {
			return kv, nil
		}
	} else if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("broker: bucket %s: %w", LeaseBucket, err)
	}
	kv, err = placed(ctx, func() (jetstream.KeyValue, error) {
		return js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: LeaseBucket, Description: "switchyard: which process runs each session",
			Storage: st.js(), History: 1, Replicas: o.replicasFor(ctx, js, "KV_"+LeaseBucket), TTL: LeaseMaxAge,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("broker: bucket %s: %w", LeaseBucket, err)
	}
	return kv, nil
}
