package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/session"
)

const leaseGraph = `digraph s { kind="session"; a [prompt="a"] }`

// A durable session has one runner: while its owner lives, a second start
// or resume of it is refused with who runs it; when the owner stops, it
// may be resumed.
func TestLeaseOneRunner(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := newRun(t)
	cfg := r.durable(leaseGraph, "owned")
	s1, err := session.Start(ctx, cfg)
	require.NoError(t, err)

	host, _ := os.Hostname()
	want := fmt.Sprintf("session owned is served by %s pid %d since ", host, os.Getpid())
	_, err = session.Resume(ctx, cfg)
	require.ErrorContains(t, err, want)
	var held *session.HeldError
	require.ErrorAs(t, err, &held)
	require.Equal(t, os.Getpid(), held.Owner.PID)
	_, err = session.Start(ctx, cfg)
	require.ErrorContains(t, err, want, "a second start is refused the same way")

	o, err := session.ReadOwner(ctx, r.broker, "owned", time.Now())
	require.NoError(t, err)
	require.NotNil(t, o)
	require.Equal(t, os.Getpid(), o.PID)

	s1.Stop()
	o, err = session.ReadOwner(ctx, r.broker, "owned", time.Now())
	require.NoError(t, err)
	require.Nil(t, o, "a stopped session's lease is released")
	s2, err := session.Resume(ctx, cfg)
	require.NoError(t, err, "a session nobody runs resumes")
	s2.Stop()
}

// A lease another host holds lasts its TTL on the taker's clock: refused
// before, taken over after.
func TestLeaseTakeoverAfterTTL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := newRun(t)
	cfg := r.durable(leaseGraph, "crashed")
	s, err := session.Start(ctx, cfg)
	require.NoError(t, err)
	s.Stop()

	// The owner on another machine that died without a word.
	start := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	kv, err := broker.Leases(ctx, r.broker.JetStream(), r.broker.Storage())
	require.NoError(t, err)
	data, _ := json.Marshal(session.Owner{Host: "elsewhere", PID: 42, Since: start, Expires: start.Add(10 * time.Second), Token: "t"})
	_, err = kv.Put(ctx, "crashed", data)
	require.NoError(t, err)

	clk := clock.NewFake(start.Add(9 * time.Second))
	cfg.Clock = clk
	_, err = session.Resume(ctx, cfg)
	require.EqualError(t, err, "session crashed is served by elsewhere pid 42 since 2026-11-23T12:00:00Z")

	// Expired by the owner's word: the taker still watches the entry for
	// two thirds of the TTL on its own clock (it first read it at 9 s).
	clk.Advance(time.Second)
	s2, err := resumeAdvancing(t, clk, cfg)
	require.NoError(t, err, "the lease expired: the session is taken over")
	require.GreaterOrEqual(t, clk.Now().Sub(start.Add(9*time.Second)), 10*time.Second*2/3, "taken only once seen stale")
	o, err := session.ReadOwner(ctx, r.broker, "crashed", clk.Now())
	require.NoError(t, err)
	require.Equal(t, os.Getpid(), o.PID)
	s2.Stop()
}

// A session whose lease another process took stops: its renewal finds the
// new owner's entry, it says so, and it completes as failed here.
func TestLeaseLostStopsTheSession(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := newRun(t)
	g := r.load(leaseGraph)
	clk1 := clock.NewFake(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	cfg := r.config(g)
	cfg.ID, cfg.Durable, cfg.LogsDir, cfg.Clock = "taken", true, "", clk1
	cfg.LeaseTTL = 300 * time.Millisecond // renewed every 100 ms
	s1, err := session.Start(ctx, cfg)
	require.NoError(t, err)

	// Another runner whose clock is past the lease (the owner stalled).
	clk2 := clock.NewFake(clk1.Now().Add(time.Minute))
	cfg2 := cfg
	cfg2.Clock, cfg2.Observer = clk2, nil
	s2, err := session.Resume(ctx, cfg2)
	require.NoError(t, err)
	defer s2.Stop()

	select { // at its next renewal
	case <-s1.Done():
	case <-ctx.Done():
		t.Fatal("the first owner did not stop")
	}
	require.NotNil(t, r.event("session.lease_lost", ""))
	rep := s1.Report()
	require.Equal(t, "fail", rep.Status)
	require.Contains(t, rep.Reason, "lease lost")
	s1.Stop()
	o, err := session.ReadOwner(ctx, r.broker, "taken", clk2.Now())
	require.NoError(t, err)
	require.NotNil(t, o, "the first owner's stop leaves the new owner's lease")
}

// A renewal written although its reply never came (it timed out on a
// loaded machine) does not cost the owner its lease: the next renewal
// finds the entry moved on but still naming this process, and renews it
// after that revision.
func TestLeaseRenewalSurvivesALostReply(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := newRun(t)
	cfg := r.durable(leaseGraph, "renewed")
	cfg.LeaseTTL = 300 * time.Millisecond // renewed every 100 ms
	s, err := session.Start(ctx, cfg)
	require.NoError(t, err)
	defer s.Stop()

	kv, err := r.broker.JetStream().KeyValue(ctx, broker.LeaseBucket)
	require.NoError(t, err)
	w, err := kv.Watch(ctx, "renewed", jetstream.UpdatesOnly())
	require.NoError(t, err)
	defer func() { _ = w.Stop() }()
	// The owner's entry written again behind its back: what a renewal
	// whose reply was lost leaves in the store.
	e, err := kv.Get(ctx, "renewed")
	require.NoError(t, err)
	var mine session.Owner
	require.NoError(t, json.Unmarshal(e.Value(), &mine))
	rev, err := kv.Put(ctx, "renewed", e.Value())
	require.NoError(t, err)

	for renewed := false; !renewed; {
		select {
		case u := <-w.Updates():
			if u == nil || u.Revision() <= rev {
				continue
			}
			require.Equal(t, jetstream.KeyValuePut, u.Operation(), "the owner renewed, it did not give up")
			var o session.Owner
			require.NoError(t, json.Unmarshal(u.Value(), &o))
			require.Equal(t, mine.Token, o.Token, "renewed by the same owner")
			renewed = true
		case <-s.Done():
			t.Fatalf("the owner stopped: %s", s.Report().Reason)
		case <-ctx.Done():
			t.Fatal("the owner never renewed its lease")
		}
	}
	require.Nil(t, r.event("session.lease_lost", ""))
}

// resumeAdvancing resumes cfg's session while advancing clk a second at a
// time whenever the resume waits on it, and returns what Resume did.
func resumeAdvancing(t *testing.T, clk *clock.Fake, cfg session.Config) (*session.Session, error) {
	t.Helper()
	type result struct {
		s   *session.Session
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := session.Resume(context.Background(), cfg)
		done <- result{s, err}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case r := <-done:
			return r.s, r.err
		default:
		}
		require.True(t, time.Now().Before(deadline), "resume never returned")
		if clk.Pending() > 0 {
			clk.Advance(time.Second)
		} else {
			time.Sleep(time.Millisecond) // polling for the resume's timer, not synchronising work
		}
	}
}

// A taker whose clock runs ahead of a live owner's on another host sees
// the owner's expiry pass, but also its renewals move the entry: it
// leaves the session to its owner.
func TestLeaseSkewedClockLeavesALiveOwner(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := newRun(t)
	cfg := r.durable(leaseGraph, "skewed")
	s, err := session.Start(ctx, cfg)
	require.NoError(t, err)
	s.Stop()

	// The owner's clock is a minute behind the taker's: every entry it
	// writes has expired on the taker's clock.
	start := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	kv, err := broker.Leases(ctx, r.broker.JetStream(), r.broker.Storage())
	require.NoError(t, err)
	renew := func(at time.Time) {
		data, _ := json.Marshal(session.Owner{Host: "elsewhere", PID: 42, Since: start, Expires: at.Add(10 * time.Second), Token: "t", TTL: 10 * time.Second})
		_, err := kv.Put(ctx, "skewed", data)
		require.NoError(t, err)
	}
	renew(start)
	clk := clock.NewFake(start.Add(time.Minute))
	cfg.Clock = clk

	type result struct {
		s   *session.Session
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := session.Resume(ctx, cfg)
		done <- result{s, err}
	}()
	// The owner renews while the taker watches.
	require.Eventually(t, func() bool { return clk.Pending() > 0 }, 20*time.Second, time.Millisecond, "the taker never waited")
	renew(start.Add(3 * time.Second))
	clk.Advance(2 * time.Second)
	var res result
	select {
	case res = <-done:
	case <-ctx.Done():
		t.Fatal("resume never returned")
	}
	if res.s != nil {
		res.s.Stop()
	}
	require.EqualError(t, res.err, "session skewed is served by elsewhere pid 42 since 2026-11-23T12:00:00Z")

	// When the renewals stop, the same taker takes it over.
	s2, err := resumeAdvancing(t, clk, cfg)
	require.NoError(t, err)
	s2.Stop()
}

// TestLeaseTTLBelowBucketAge: a lease TTL the lease bucket could forget
// between two renewals (broker.LeaseMaxAge) is refused at the start, with
// the bound; one below it runs.
func TestLeaseTTLBelowBucketAge(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := newRun(t)
	cfg := r.durable(leaseGraph, "longttl")
	cfg.LeaseTTL = broker.LeaseMaxAge/3 + time.Second
	_, err := session.Start(ctx, cfg)
	require.ErrorContains(t, err, "lease TTL of 8h0m1s is too long: at most 8h0m0s")
	cfg.LeaseTTL = time.Minute
	s, err := session.Start(ctx, cfg)
	require.NoError(t, err)
	s.Stop()
}

// TestLeaseBucketFoundAgain: the broker remembers the lease bucket once
// found (a start does not look it up each time); when it was removed since
// (an operator, a test), the next start makes it again and runs, and its
// lease is in the new bucket.
func TestLeaseBucketFoundAgain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := newRun(t)
	s, err := session.Start(ctx, r.durable(leaseGraph, "first"))
	require.NoError(t, err)
	s.Stop()
	require.NoError(t, r.broker.JetStream().DeleteKeyValue(ctx, broker.LeaseBucket))
	s, err = session.Start(ctx, r.durable(leaseGraph, "second"))
	require.NoError(t, err, "the lease bucket is made again")
	defer s.Stop()
	o, err := session.ReadOwner(ctx, r.broker, "second", time.Now())
	require.NoError(t, err)
	require.NotNil(t, o, "the lease is held in the new bucket")
	require.Equal(t, os.Getpid(), o.PID)
}

// A named pipeline's start sends its claim while it takes its lease. When
// another process holds the lease of an id the store holds nothing of, the
// start is refused with who holds it, and what its claim wrote is the
// keys a start killed after its claim leaves: no session is recorded, the
// next start under the id runs (it writes over them), and RemoveUnrecorded
// removes them.
func TestNamedStartRefusedByALease(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := newRun(t) // a store without an archive

	kv, err := broker.Leases(ctx, r.broker.JetStream(), r.broker.Storage())
	require.NoError(t, err)
	now := time.Now()
	data, _ := json.Marshal(session.Owner{Host: "elsewhere", PID: 42, Since: now, Expires: now.Add(time.Hour), Token: "t"})
	for _, id := range []string{"leased1", "leased2"} {
		_, err = kv.Put(ctx, id, data)
		require.NoError(t, err)
		_, err = session.Start(ctx, r.durable(preparedPipeline, id))
		var held *session.HeldError
		require.ErrorAs(t, err, &held)
		require.Equal(t, "elsewhere", held.Owner.Host)
		_, err = session.ReadMeta(ctx, r.broker, id)
		require.ErrorIs(t, err, session.ErrNoCheckpoint, "nothing of %s is recorded", id)
		require.NoError(t, kv.Delete(ctx, id)) // the other process lets go
	}
	ids, err := broker.SharedSessions(ctx, r.broker.JetStream())
	require.NoError(t, err)
	require.Subset(t, ids, []string{"leased1", "leased2"}, "the refused starts' claims")

	cfg := r.durable(preparedPipeline, "leased1")
	cfg.Checkpoint = &session.CheckpointPolicy{Retain: true}
	rep := r.runConfig(cfg)
	require.Equal(t, "success", rep.Status, rep.Reason)
	meta, err := session.ReadMeta(ctx, r.broker, "leased1")
	require.NoError(t, err, "the next start under the id is recorded")
	require.Equal(t, "leased1", meta.ID)

	require.NoError(t, session.RemoveUnrecorded(ctx, r.broker, "leased2"))
	ids, err = broker.SharedSessions(ctx, r.broker.JetStream())
	require.NoError(t, err)
	require.NotContains(t, ids, "leased2", "removed")
	_, err = session.ReadMeta(ctx, r.broker, "leased1")
	require.NoError(t, err, "kept: recorded")
}

// A claim sent before its lease is taken is trusted only when the lease's
// entry held nothing (nobody held the id within the lease bucket's age).
// Here the id was held and released before, and the keys the claim wrote
// are removed between the claim and the lease — as a previous holder's
// removal of the id's store, landing after the claim, would do. The start
// writes its claim again once it holds the lease, and the session's
// journal (fenced by the owner's mark) works: it completes.
func TestClaimSentEarlyAfterAHolderIsWrittenAgain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := newRun(t) // a store without an archive
	js := r.broker.JetStream()
	shared, err := broker.SharedKV(ctx, js, r.broker.Storage(), 1)
	require.NoError(t, err)

	kv, err := broker.Leases(ctx, js, r.broker.Storage())
	require.NoError(t, err)
	data, _ := json.Marshal(session.Owner{Host: "elsewhere", PID: 42, Since: time.Now(), Expires: time.Now().Add(time.Hour), Token: "t"})
	_, err = kv.Put(ctx, "early1", data)
	require.NoError(t, err)
	require.NoError(t, kv.Delete(ctx, "early1")) // released

	stream, err := js.Stream(ctx, "KV_"+broker.SharedName)
	require.NoError(t, err)
	removed := 0
	session.OnClaimSentEarly(func(id string) {
		if id != "early1" {
			return
		}
		// Once the claim's mark is stored, every key of the id is purged.
		w, err := shared.Watch(ctx, id+".session.owner", jetstream.IgnoreDeletes())
		require.NoError(t, err)
		defer func() { _ = w.Stop() }()
		for e := range w.Updates() {
			if e != nil {
				break
			}
		}
		require.NoError(t, stream.Purge(ctx, jetstream.WithPurgeSubject("$KV."+broker.SharedName+"."+id+".>")))
		removed++
	})
	defer session.OnClaimSentEarly(nil)

	cfg := r.durable(preparedPipeline, "early1")
	cfg.Checkpoint = &session.CheckpointPolicy{Retain: true}
	rep := r.runConfig(cfg)
	require.Equal(t, 1, removed, "the claim was sent early, and its keys removed")
	require.Equal(t, "success", rep.Status, rep.Reason)
	meta, err := session.ReadMeta(ctx, r.broker, "early1")
	require.NoError(t, err)
	require.Equal(t, "early1", meta.ID)
}
