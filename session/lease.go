package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard/switchyard/actors"
	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/internal/crash"
)

// One session, one runner. A durable session is run by the process that
// holds its lease: a key (the session id) of the store's lease bucket
// (broker.LeaseBucket) naming the process and until when it holds the
// session. The owner renews the lease every third of its TTL, each renewal
// conditional on the revision it wrote last (an update that finds another
// revision means the session was taken over: the owner stops it). Another
// process may take the session over at once when the lease names a process
// of the same host that no longer exists (a crashed owner). A lease of
// another host is taken over only when both hold: its expiry, written on
// the owner's clock, has passed on the taker's, and the taker itself has
// seen the entry's revision unchanged for two thirds of the TTL on its own
// clock (two renewals missed). The second rule does not depend on the
// hosts' clocks agreeing: a taker whose clock runs ahead of the owner's
// sees the owner's renewals move the revision and leaves the session alone
// (as Kubernetes' leader election judges a lease by when it observed it).
// A dead owner is taken over at most the TTL after its last renewal. Both
// clocks are the session's (clock.Clock), so tests drive them.
//
// The lease decides who may start; the journal's fence makes sure that an
// ex-owner cannot write: the new owner writes its mark into the session's
// bucket, and every journal write expects the bucket's last sequence it
// knows (see journal.putLocked).

// DefaultLeaseTTL is how long a session's lease lasts without renewal: the
// longest a crashed owner keeps its sessions from being taken over by a
// process of another host.
const DefaultLeaseTTL = 10 * time.Second

// ownerKey is the key of the session's bucket that names its current
// owner: written by each owner when it takes the session, it fences the
// journal of the previous one.
const ownerKey = broker.OwnerKey

// Owner is who holds a session's lease.
type Owner struct {
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Since   time.Time `json:"since"`
	Expires time.Time `json:"expires"`
	Token   string    `json:"token"`
	// TTL is the lease's time to live (0 in entries of older versions:
	// DefaultLeaseTTL).
	TTL time.Duration `json:"ttl,omitempty"`
}

// HeldError is returned when another live process runs the session.
type HeldError struct {
	Session string
	Owner   Owner
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("session %s is served by %s pid %d since %s", e.Session, e.Owner.Host, e.Owner.PID,
		e.Owner.Since.UTC().Format(time.RFC3339))
}

// ErrLeaseLost is the error of a session that another process took over:
// its journal refuses every write.
var ErrLeaseLost = errors.New("session: lease lost: another process runs this session now")

// lease is a held session lease and its renewal.
type lease struct {
	kv  jetstream.KeyValue
	js  jetstream.JetStream
	id  string
	clk clock.Clock
	ttl time.Duration

	mu    sync.Mutex
	owner Owner
	rev   uint64
	// taken is owner as acquireLease wrote it, which claim writes as the
	// owner's mark (marshalled once).
	taken []byte

	stop, done chan struct{}
	started    bool

	// bucket is the session's bucket; fence the sequence of this owner's
	// mark in it (set by claim).
	bucket *broker.SessionBucket
	fence  uint64
	// idKey signs the runtime's envelope ids (idkey.go).
	idKey []byte
	// made: claim made the bucket (it did not exist), so it holds no
	// record of a session.
	made bool
	// purge makes release purge the entry, leaving no marker: the session
	// was removed from the store (its holder releases it after the
	// removal: broker.LeaseLeft).
	purge bool
}

var hostName = func() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	return h
}()

func newToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// live holds the tokens of the leases this process holds now.
var live sync.Map

// expired reports whether o, the entry of session id at revision rev, no
// longer holds its session at now: its TTL has passed (for an owner of
// another host, also as this process saw it: stale), or it names a
// process of this host that is gone, or a lease of this process that was
// given up (a session stopped while the server was away could not remove
// its entry).
func (o Owner) expired(id string, rev uint64, now time.Time) bool {
	if o.Host != hostName {
		seen := observe(id, rev, now)
		return !now.Before(o.Expires) && seen >= o.staleAfter()
	}
	if !now.Before(o.Expires) {
		return true
	}
	if o.PID == os.Getpid() {
		_, ok := live.Load(o.Token)
		return !ok
	}
	return !processAlive(o.PID)
}

// staleAfter is how long a taker must see o's entry unchanged before it
// may take the session from another host: two renewals missed.
func (o Owner) staleAfter() time.Duration {
	ttl := o.TTL
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}
	return ttl * 2 / 3
}

// observation is the revision of a session's lease entry this process
// last read, and when (on the clock of the read) it first saw it.
type observation struct {
	rev uint64
	at  time.Time
}

// observed holds an observation per session id whose lease another host
// holds (one entry per such session of the store).
var observed sync.Map

// observe records that the lease entry of session id is at revision rev
// at now, and returns how long this process has seen that revision.
func observe(id string, rev uint64, now time.Time) time.Duration {
	if v, ok := observed.Load(id); ok {
		if o := v.(observation); o.rev == rev && !now.Before(o.at) {
			return now.Sub(o.at)
		}
	}
	observed.Store(id, observation{rev: rev, at: now})
	return 0
}

// ReadOwner returns the holder of session id's lease, nil when nobody
// holds it (or the lease expired at now).
func ReadOwner(ctx context.Context, b *broker.Broker, id string, now time.Time) (*Owner, error) {
	kv, err := b.JetStream().KeyValue(ctx, broker.LeaseBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	e, err := kv.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	o := &Owner{}
	if err := json.Unmarshal(e.Value(), o); err != nil || o.expired(id, e.Revision(), now) {
		return nil, nil
	}
	return o, nil
}

// acquireLease takes session id's lease for this process, or returns a
// *HeldError naming the process that holds it.
func acquireLease(ctx context.Context, b *broker.Broker, id string, clk clock.Clock, ttl time.Duration, replicas int) (*lease, error) {
	l, err := newLease(b, id, clk, ttl)
	if err != nil {
		return nil, err
	}
	if _, err := l.acquire(ctx, b, replicas, nil); err != nil {
		return nil, err
	}
	return l, nil
}

// newLease is session id's lease for this process, not taken yet: its
// owner is known (and marshalled), so a claim can send the owner's mark
// while the lease is taken (claimThen).
func newLease(b *broker.Broker, id string, clk clock.Clock, ttl time.Duration) (*lease, error) {
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}
	if ttl > broker.LeaseMaxAge/3 {
		return nil, fmt.Errorf("session: a lease TTL of %v is too long: at most %v (the lease bucket forgets what is not written for %v)",
			ttl, broker.LeaseMaxAge/3, broker.LeaseMaxAge)
	}
	now := clk.Now()
	l := &lease{js: b.JetStream(), id: id, clk: clk, ttl: ttl, stop: make(chan struct{}), done: make(chan struct{}),
		owner: Owner{Host: hostName, PID: os.Getpid(), Since: now.UTC(), Expires: now.Add(ttl).UTC(), Token: newToken(), TTL: ttl}}
	l.taken, _ = json.Marshal(l.owner)
	return l, nil
}

// send sends l's first write — its entry created, only where the id's
// holds nothing — and does not wait for the answer: acquire does. nil when
// it could not be sent (acquire then writes as without it).
func (l *lease) send(ctx context.Context, b *broker.Broker, replicas int) jetstream.PubAckFuture {
	kv, _, err := b.Leases(ctx, replicas)
	if err != nil {
		return nil
	}
	m := nats.NewMsg("$KV." + kv.Bucket() + "." + l.id)
	m.Data = l.taken
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
	f, err := l.js.PublishMsgAsync(m, jetstream.WithRetryAttempts(0))
	if err != nil {
		return nil
	}
	return f
}

// acquire takes l, or returns a *HeldError naming the process that holds
// it. sent, when not nil, is l's first write on its way (send): its
// answer is waited for, and a refusal judged as any. first says that
// write took the lease: the id's entry held no message at all — nobody
// held the lease within the lease bucket's age (broker.LeaseMaxAge), as
// every holder writes, renews and releases it.
func (l *lease) acquire(ctx context.Context, b *broker.Broker, replicas int, sent jetstream.PubAckFuture) (first bool, err error) {
	id, clk, data := l.id, l.clk, l.taken
	kv, cached, err := b.Leases(ctx, replicas)
	if err != nil {
		return false, fmt.Errorf("session: lease: %w", err)
	}
	l.kv = kv
	if sent != nil {
		select {
		case ack := <-sent.Ok():
			l.rev = ack.Sequence
			live.Store(l.owner.Token, struct{}{})
			return true, nil
		case <-sent.Err():
			// Held, or the bucket gone: written again below, where
			// each answer is judged.
		case <-ctx.Done():
			return false, fmt.Errorf("session: lease of %s: %w", id, ctx.Err())
		}
	}
	for range 5 { // lost races with other takers start over
		rev, err := kv.Create(ctx, id, data)
		if err == nil {
			l.rev = rev
			live.Store(l.owner.Token, struct{}{})
			return false, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			if cached {
				// The bucket the broker remembers may be gone: found
				// again (made again), once.
				b.ForgetLeases()
				if kv, cached, err = b.Leases(ctx, replicas); err != nil {
					return false, fmt.Errorf("session: lease: %w", err)
				}
				l.kv = kv
				continue
			}
			return false, fmt.Errorf("session: lease of %s: %w", id, err)
		}
		e, err := kv.Get(ctx, id)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // released meanwhile
		}
		if err != nil {
			return false, fmt.Errorf("session: lease of %s: %w", id, err)
		}
		held := Owner{}
		if json.Unmarshal(e.Value(), &held) == nil && !held.expired(id, e.Revision(), clk.Now()) {
			if held.Host == hostName || clk.Now().Before(held.Expires) {
				return false, &HeldError{Session: id, Owner: held}
			}
			// Expired by the owner's word, not yet seen stale here.
			moved, err := waitStale(ctx, kv, id, e.Revision(), held, clk)
			if err != nil {
				return false, fmt.Errorf("session: lease of %s: %w", id, err)
			}
			if moved {
				// Renewed by its owner: held. Released or taken by
				// another: judged again.
				var cur Owner
				if e, err := kv.Get(ctx, id); err == nil && json.Unmarshal(e.Value(), &cur) == nil && cur.Token == held.Token {
					return false, &HeldError{Session: id, Owner: cur}
				}
				continue
			}
		}
		rev, err = kv.Update(ctx, id, data, e.Revision())
		if err == nil {
			l.rev = rev
			live.Store(l.owner.Token, struct{}{})
			return false, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return false, fmt.Errorf("session: lease of %s: %w", id, err)
		}
	}
	return false, fmt.Errorf("session: lease of %s: contended", id)
}

// waitStale watches the lease entry of session id, at revision rev and
// held by another host's owner, until this process has seen it unchanged
// for owner.staleAfter() (moved false: it may be taken at rev), or until
// it moves (moved true: renewed, released or taken by someone else).
func waitStale(ctx context.Context, kv jetstream.KeyValue, id string, rev uint64, owner Owner, clk clock.Clock) (moved bool, err error) {
	need := owner.staleAfter()
	for {
		seen := observe(id, rev, clk.Now())
		if seen >= need {
			return false, nil
		}
		t := clk.NewTimer(min(need-seen, need/8))
		select {
		case <-ctx.Done():
			t.Stop()
			return false, ctx.Err()
		case <-t.C():
		}
		e, err := kv.Get(ctx, id)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if e.Revision() != rev {
			return true, nil
		}
	}
}

// renew starts renewing the lease every third of its TTL; lost is called
// once, from the renewal goroutine, if another process took it.
func (l *lease) renew(lost func(error)) {
	l.started = true
	go func() { // owned by the lease: release stops it
		defer close(l.done)
		tick := time.NewTicker(l.ttl / 3)
		defer tick.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-tick.C:
			}
			if err := l.renewOnce(); errors.Is(err, ErrLeaseLost) {
				lost(err)
				return
			}
		}
	}()
}

// renewOnce extends the lease by its TTL from now. ErrLeaseLost when the
// entry is no longer the one this process wrote; other errors (a server
// away) are tried again at the next renewal.
func (l *lease) renewOnce() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	o := l.owner
	o.Expires = l.clk.Now().Add(l.ttl).UTC()
	data, _ := json.Marshal(o)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rev, err := l.kv.Update(ctx, l.id, data, l.rev)
	if errors.Is(err, jetstream.ErrKeyExists) {
		// The entry moved on. An earlier renewal whose reply never came (it
		// timed out on a loaded machine) may have been written all the same:
		// the entry is still this process's when it carries its token, and
		// the renewal is made again after that revision. Another token is a
		// taker's. The entry is read from the bucket's leader: a replica
		// not caught up (a server just restarted) may answer an older one.
		entry, seq, gerr := lastFromLeader(ctx, l.js, "KV_"+l.kv.Bucket(), "$KV."+l.kv.Bucket()+"."+l.id)
		if gerr != nil {
			if errors.Is(gerr, jetstream.ErrKeyNotFound) {
				return ErrLeaseLost
			}
			return gerr // unknown: tried again at the next renewal
		}
		var cur Owner
		if json.Unmarshal(entry, &cur) != nil || cur.Token != l.owner.Token {
			return ErrLeaseLost
		}
		rev, err = l.kv.Update(ctx, l.id, data, seq)
	}
	switch {
	case err == nil:
		l.owner, l.rev = o, rev
		return nil
	case errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyNotFound):
		return ErrLeaseLost
	}
	return err
}

// release stops the renewal and gives the lease up (unless another
// process took it meanwhile). Idempotent.
func (l *lease) release() {
	if l == nil {
		return
	}
	l.mu.Lock()
	select {
	case <-l.stop:
		l.mu.Unlock()
		return
	default:
		close(l.stop)
		live.Delete(l.owner.Token)
	}
	l.mu.Unlock()
	if l.started {
		<-l.done
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.purge {
		_ = l.kv.Purge(ctx, l.id, jetstream.LastRevision(l.rev))
		return
	}
	_ = l.kv.Delete(ctx, l.id, jetstream.LastRevision(l.rev))
}

// claim takes a durable session's lease and writes this owner's mark into
// the session's bucket: the bucket sequence it returns fences the journal
// of any previous owner. The caller releases the lease. created says the
// session is a new one (a start or a fork), which may not take the id of
// a session the store holds; a session that completed and was archived
// gets its bucket back from the archive (broker.RestoreSession) to be
// resumed. opts go to the bucket's creation (broker.Fresh for a session
// being created).
func claim(ctx context.Context, cfg *Config, created bool, opts ...broker.Option) (*lease, error) {
	return claimThen(ctx, cfg, created, nil, opts...)
}

// claimThen is claim calling leased (when not nil) once the lease is
// held, before anything else is asked of the store: what the caller sends
// then overlaps the making of the bucket.
//
// A new session placed in the shared bucket (broker.PlacesInShared: a
// named pipeline, a store prepared ahead) of a store without an archive
// sends its claim — the id key and the owner's mark, each written only
// where its key holds nothing (sendClaim) — with its lease's first write:
// three writes, one wait, and the store's answers are the same whichever
// comes first. Only
// a start whose claim was accepted and whose lease was then refused leaves
// something behind: the id's keys without the session's record, as a
// start killed after its claim does (a later start of the id writes over
// them; RemoveUnrecorded removes them). Its claim was accepted only where
// the bucket held nothing of the id, so no session's keys are changed.
// Those keys are not taken back: the holder of the lease may be the other
// start, which then reads this id key as its own (idKey).
func claimThen(ctx context.Context, cfg *Config, created bool, leased func(), opts ...broker.Option) (*lease, error) {
	// A session of this process that just ended under the id (or the
	// one a fork starts from) may still be having its store removed, its
	// lease held until then (Session.remover).
	if err := awaitRemoval(ctx, cfg.Broker, cfg.ID, cfg.ForkOf); err != nil {
		return nil, fmt.Errorf("session: lease of %s: %w", cfg.ID, err)
	}
	n := cfg.replicas()
	l, err := newLease(cfg.Broker, cfg.ID, cfg.Clock, cfg.LeaseTTL)
	if err != nil {
		return nil, err
	}
	js := cfg.Broker.JetStream()
	// A new session under an id of its caller's learns from its claim
	// (create-only writes) whether the shared bucket held the id, not
	// from a read of it first: a round trip through the JetStream API
	// fewer on a named pipeline's start. l.made is then a guess until the
	// claim answers.
	guess := created && !cfg.generated
	if guess {
		opts = append(opts[:len(opts):len(opts)], broker.Claims())
	}
	kvOpts := append(opts[:len(opts):len(opts)], broker.Replicas(n), broker.Made(&l.made), broker.LookupsOn(cfg.Broker))
	var kv *broker.SessionBucket
	var sent *claimSent
	var mine []byte
	// Sent early only where nothing else can hold the id: its bucket of
	// its own is looked for first (SessionKV, without a write), and a
	// store with an archive is not sent to before the archive is asked —
	// keys in the shared bucket are found before an archived session, so
	// keys written there for an archived id and left by a kill before
	// their removal would hide that session from its readers.
	early := created && broker.PlacesInShared(opts...) && (cfg.generated || !cfg.Broker.MayHaveArchived(cfg.ID))
	if early {
		// Its place in the shared bucket is found without a write.
		if kv, err = broker.SessionKV(ctx, js, cfg.ID, cfg.Broker.Storage(), kvOpts...); err != nil {
			return nil, fmt.Errorf("session: checkpoint store: %w", err)
		}
		if cfg.generated && l.made {
			mine = actors.NewIDKey()
		}
		if kv.Shared() && l.made {
			sent = sendClaim(js, kv, mine, l.taken)
		}
	}
	var leaseSent jetstream.PubAckFuture
	if sent != nil {
		if f := claimSentEarly.Load(); f != nil && *f != nil {
			(*f)(cfg.ID)
		}
		leaseSent = l.send(ctx, cfg.Broker, n)
		crash.Point("lease-sent") // the claim and the lease on their way, no answer read
	}
	var archived bool
	var aerr error
	var looked chan struct{}
	if created && !cfg.generated && cfg.Broker.MayHaveArchived(cfg.ID) {
		// Whether the archive holds the id is asked while the lease is
		// taken and the bucket made (a server with an archive sends no
		// claim early): an archived session has none here (the archive
		// holds it), so it is made, and removed if the id is refused. A
		// generated id
		// (NewID): no session had it, the archive holds nothing of it —
		// a round trip to the archive's stream fewer.
		looked = make(chan struct{})
		go func() {
			defer close(looked)
			archived, aerr = cfg.Broker.Archived(ctx, cfg.ID)
		}()
	}
	first, err := l.acquire(ctx, cfg.Broker, n, leaseSent)
	if err != nil {
		if looked != nil {
			<-looked
		}
		if sent != nil {
			sent.await(ctx, l) // no write of this start lands after it returns
		}
		return nil, err
	}
	if sent != nil && !first {
		// The lease was taken from a holder before (released, or
		// expired): the claim may have landed before that holder's
		// removal of the id's keys was done, and been removed with them.
		// Its answer is not trusted: the claim is written again below,
		// after the lease, as for any store the session finds keys in.
		sent.await(ctx, l)
		sent, l.made = nil, false
	}
	if leased != nil {
		leased()
	}
	if !created {
		archived, err = cfg.Broker.Archived(ctx, cfg.ID)
		if err == nil && archived {
			err = broker.RestoreSession(ctx, js, cfg.ID, cfg.Broker.Storage(), append(opts, broker.Replicas(n))...)
		}
		if err != nil {
			l.release()
			return nil, fmt.Errorf("session: checkpoint store: %w", err)
		}
	}
	if !early {
		kv, err = broker.SessionKV(ctx, js, cfg.ID, cfg.Broker.Storage(), kvOpts...)
		if err == nil && created && cfg.generated && l.made {
			// A generated id's store, made without asking whether the
			// store held the id: the key written is the proof that it
			// did not.
			mine = actors.NewIDKey()
		}
	}
	guess = guess && kv != nil && kv.Shared() && l.made
	var seq uint64
	var ok bool
	if looked != nil {
		<-looked
		if aerr == nil && archived {
			aerr = fmt.Errorf("session: %s already exists in the store: resume it (switchyard resume %s) or choose another id", cfg.ID, cfg.ID)
		} else if aerr != nil {
			aerr = fmt.Errorf("session: checkpoint store: %w", aerr)
		}
		if aerr != nil {
			if err == nil && l.made && !guess { // a guess wrote nothing yet
				if derr := kv.Drop(ctx, js); derr != nil && cfg.Logger != nil {
					cfg.Logger.Warn("session: removing the bucket of a session not made", "session", cfg.ID, "err", derr)
				}
			}
			l.release()
			return nil, aerr
		}
	}
	if err == nil && n > 1 {
		// Artifacts are stored on demand, with one replica unless their
		// store exists: it is made now, replicated.
		_, err = broker.SessionObjects(ctx, js, cfg.ID, cfg.Broker.Storage(), broker.Replicas(n))
	}
	if err != nil {
		l.release()
		return nil, fmt.Errorf("session: checkpoint store: %w", err)
	}
	// The id key first: the owner's mark below stays the bucket's latest
	// write, which the journal's fence starts from.
	data := l.taken // the owner, as its lease holds it (not renewed yet)
	if sent != nil {
		seq, ok = sent.await(ctx, l)
	} else {
		seq, ok = claimAtOnce(ctx, js, kv, l, mine, data)
	}
	if !ok && guess {
		// The id's keys were there (a session, or what a start
		// interrupted left), or the writes went unanswered: the store is
		// not known new, and the session's record is looked for
		// (newSessionWith).
		l.made = false
	}
	if !ok {
		// Retried like the mark: a bucket just made on a cluster may not
		// answer yet (no responders while its leader is elected).
		err = broker.Retry(ctx, 5*time.Second, func(ctx context.Context) error {
			var err error
			l.idKey, err = idKey(ctx, kv, l.made, mine)
			return err
		})
		if err != nil {
			l.release()
			return nil, fmt.Errorf("session: %w", err)
		}
		err = broker.Retry(ctx, 5*time.Second, func(ctx context.Context) error {
			var err error
			seq, err = kv.Put(ctx, ownerKey, data)
			return err
		})
		if err != nil {
			l.release()
			return nil, fmt.Errorf("session: checkpoint store: %w", err)
		}
	}
	l.bucket, l.fence = kv, seq
	return l, nil
}

// claimAtOnce writes, in one round trip, the id key and this owner's mark
// (data) into a store that is new to the session (claim made its bucket,
// or its keys in the shared bucket): the key (mine, or a new one) created,
// then the mark, created as well — each written only if its key holds
// nothing. It returns the mark's sequence, and false when the store is not
// new (l.made), or when either write was refused or not answered: a
// leftover of a start that crashed there, an id met by chance, a bucket
// just made whose leader is not elected yet. The caller then writes them
// one after the other as for any store (idKey, then the mark), which
// reads what is there and writes the mark again, last: what this call
// stored is this owner's, and the same writes again.
func claimAtOnce(ctx context.Context, js jetstream.JetStream, kv *broker.SessionBucket, l *lease, mine, data []byte) (uint64, bool) {
	if !l.made {
		return 0, false
	}
	return sendClaim(js, kv, mine, data).await(ctx, l)
}

// claimSentEarly is called with a claim sent before its lease is taken
// (a test's OnClaimSentEarly).
var claimSentEarly atomic.Pointer[func(id string)]

// claimSent is a claim's two writes on their way (sendClaim).
type claimSent struct {
	key  []byte
	acks [2]jetstream.PubAckFuture
	err  bool // a write could not be sent
}

// sendClaim sends claimAtOnce's writes — the id key (mine, or a new one)
// and the owner's mark (data), each created only where its key holds
// nothing — without waiting for their answers (await).
func sendClaim(js jetstream.JetStream, kv *broker.SessionBucket, mine, data []byte) *claimSent {
	c := &claimSent{key: mine}
	if c.key == nil {
		c.key = actors.NewIDKey()
	}
	for i, w := range [2]struct {
		key  string
		data []byte
	}{{idKeyKey, c.key}, {ownerKey, data}} {
		m := nats.NewMsg(kv.Subject(w.key))
		m.Data = w.data
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
		f, err := js.PublishMsgAsync(m)
		if err != nil {
			c.err = true
			return c
		}
		c.acks[i] = f
		if i == 0 {
			crash.Point("claim-key-sent") // the id key on its way, the mark not yet
		}
	}
	return c
}

// await is the claim's answer: the mark's sequence, and whether both
// writes were made (then l holds the id key written).
func (c *claimSent) await(ctx context.Context, l *lease) (uint64, bool) {
	if c.err {
		return 0, false
	}
	var seq uint64
	for _, f := range c.acks {
		select {
		case ack := <-f.Ok():
			seq = ack.Sequence
		case <-f.Err():
			return 0, false
		case <-ctx.Done():
			return 0, false
		}
	}
	l.idKey = c.key
	return seq, true
}
