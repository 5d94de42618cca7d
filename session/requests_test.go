package session_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/session"
)

// TestDurableRunRequests watches the JetStream API requests of a durable
// pipeline's run, from its start to its removal: its start looks up
// neither the lease bucket (the broker remembers it from the first run)
// nor a work stream (a pipeline makes one only when outside input comes:
// none is made, nor removed), and at its
// end it does not look at the outcome stream (it sent no pool job) nor
// write a last snapshot of its state (its store is removed).
func TestDurableRunRequests(t *testing.T) {
	r := newRun(t)
	nc, err := r.broker.NewConn()
	require.NoError(t, err)
	defer nc.Close()
	const mark = "$JS.API.TEST.MARK"
	var mu sync.Mutex
	var seen []string
	marks := make(chan struct{}, 4)
	sub, err := nc.Subscribe("$JS.API.>", func(m *nats.Msg) {
		if m.Subject == mark {
			marks <- struct{}{}
			return
		}
		mu.Lock()
		seen = append(seen, m.Subject)
		mu.Unlock()
	})
	require.NoError(t, err)
	defer func() { _ = sub.Unsubscribe() }()
	require.NoError(t, nc.Flush())
	// requests runs a durable pipeline id to its end, its store removed,
	// and returns the API requests its run sent: the runtime's connection
	// sent them before the mark, which reaches the watcher after them.
	const withAgent = `digraph p { start [shape=Mdiamond]; a [prompt="a"]; exit [shape=Msquare]; start -> a -> exit }`
	requests := func(id, src string) []string {
		mu.Lock()
		seen = nil
		mu.Unlock()
		cfg := r.durable(src, id)
		cfg.Checkpoint = &session.CheckpointPolicy{}
		rep := r.runConfig(cfg)
		require.Equal(t, "success", rep.Status)
		// Its store is removed in the background (Session.remover).
		require.NoError(t, session.AwaitRemoval(context.Background(), r.broker, id))
		require.NoError(t, r.broker.Conn().Publish(mark, nil))
		select {
		case <-marks:
		case <-time.After(10 * time.Second):
			t.Fatal("the mark did not arrive")
		}
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
	snaps, err := nc.SubscribeSync("$KV." + broker.KVName("req2") + ".checkpoint.latest")
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	first := requests("req1", withAgent)
	require.Contains(t, first, "$JS.API.STREAM.INFO.KV_"+broker.LeaseBucket, "the first start finds the lease bucket")
	got := requests("req2", withAgent)
	has := func(prefix string) bool {
		for _, s := range got {
			if strings.HasPrefix(s, prefix) {
				return true
			}
		}
		return false
	}
	require.NotContains(t, got, "$JS.API.STREAM.CREATE."+broker.StreamName("req2"), "made a work stream no outside input came to")
	require.False(t, has("$JS.API.CONSUMER.CREATE."+broker.StreamName("req2")), "made a consumer: %v", got)
	require.NotContains(t, got, "$JS.API.STREAM.DELETE."+broker.StreamName("req2"), "removed a work stream it never made")
	// A new pipeline under an id of its caller's goes to the shared
	// bucket: no bucket of its own made and deleted, its keys purged.
	require.False(t, has("$JS.API.STREAM.CREATE.KV_"+broker.KVName("req2")), "made a bucket of its own: %v", got)
	require.False(t, has("$JS.API.STREAM.DELETE.KV_"+broker.KVName("req2")), "deleted a bucket of its own: %v", got)
	require.True(t, has("$JS.API.STREAM.PURGE.KV_"+broker.SharedName), "purged its keys: %v", got)
	require.False(t, has("$JS.API.STREAM.INFO.KV_"+broker.LeaseBucket), "looked the lease bucket up again: %v", got)
	require.False(t, has("$JS.API.STREAM.INFO."+broker.StreamName("req2")), "looked its work stream up: %v", got)
	require.False(t, has("$JS.API.STREAM.INFO.SYW_"), "looked at the pool's streams: %v", got)
	require.False(t, has("$JS.API.STREAM.DELETE."+broker.DeadLetterStreamName("req2")), "removed a dead-letter stream it never made: %v", got)
	require.False(t, has("$JS.API.STREAM.DELETE."+broker.EventStreamName("req2")), "removed an event stream the runtime never makes: %v", got)
	// a's response went to exit as an artifact: its object store goes.
	require.True(t, has("$JS.API.STREAM.DELETE.OBJ_"+broker.ObjectsName("req2")), "left its object store: %v", got)
	requireStoreGone(context.Background(), t, r.broker, "req2")
	// A pipeline that stored no artifact has no object store to remove.
	got = requests("req3", `digraph p { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }`)
	require.False(t, has("$JS.API.STREAM.DELETE.OBJ_"+broker.ObjectsName("req3")), "removed an object store it never made: %v", got)
	require.True(t, has("$JS.API.STREAM.PURGE.KV_"+broker.SharedName), "purged its keys: %v", got)
	require.NoError(t, nc.Flush())
	n, _, err := snaps.Pending()
	require.NoError(t, err)
	require.Zero(t, n, "wrote a last snapshot of a session removed at its end")
}

// TestLeaseReleasedAfterRemoval: a successful session's lease is released
// once its store is removed, not before: while its keys (in the shared
// bucket) or its bucket (its own) are being removed, no other process can
// claim the id and have what its claim writes removed with them.
func TestLeaseReleasedAfterRemoval(t *testing.T) {
	r := newRun(t)
	nc, err := r.broker.NewConn()
	require.NoError(t, err)
	defer nc.Close()
	const mark = "test.mark"
	msgs := make(chan *nats.Msg, 256)
	for _, subj := range []string{"$JS.API.STREAM.>", "$KV." + broker.LeaseBucket + ".>", mark} {
		sub, err := nc.ChanSubscribe(subj, msgs)
		require.NoError(t, err)
		defer func() { _ = sub.Unsubscribe() }()
	}
	require.NoError(t, nc.Flush())
	// steps runs a durable pipeline under id (generated when empty) to its
	// end, its store removed, and returns the removal's steps in the
	// order the server saw them.
	steps := func(id string) (string, []string) {
		cfg := r.durable(`digraph p { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }`, id)
		cfg.Checkpoint = &session.CheckpointPolicy{} // removed at its end, not archived
		s, rep := r.runSession(cfg)
		require.Equal(t, "success", rep.Status)
		id = s.ID()
		require.NoError(t, session.AwaitRemoval(context.Background(), r.broker, id))
		require.NoError(t, r.broker.Conn().Publish(mark, nil))
		var got []string
		for {
			select {
			case m := <-msgs:
				switch {
				case m.Subject == mark:
					return id, got
				case m.Subject == "$KV."+broker.LeaseBucket+"."+id && m.Header.Get("KV-Operation") != "":
					got = append(got, "lease released")
				case m.Subject == "$JS.API.STREAM.PURGE.KV_"+broker.SharedName && strings.Contains(string(m.Data), "."+id+"."):
					got = append(got, "keys purged")
				case m.Subject == "$JS.API.STREAM.DELETE.KV_"+broker.KVName(id):
					got = append(got, "bucket deleted")
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the mark did not arrive")
			}
		}
	}
	// The process's first pipeline under a generated id: a bucket of its own.
	id, got := steps("")
	require.Equal(t, []string{"bucket deleted", "lease released"}, got, "session %s", id)
	// A named pipeline: its keys in the shared bucket, removed in the
	// background.
	_, got = steps("named1")
	require.Equal(t, []string{"keys purged", "lease released"}, got)
}

// TestClaimWritesKeyAndMarkAtOnce: a new pipeline's claim writes its id
// key and its owner's mark in the shared bucket together, each on the
// condition that its key holds nothing, the mark last; a store that
// holds what a start that crashed left (a key and a mark, no record of a
// session) is claimed the way any existing store is: the key there kept,
// the mark written again, this owner's.
func TestClaimWritesKeyAndMarkAtOnce(t *testing.T) {
	r := newRun(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := r.broker.NewConn()
	require.NoError(t, err)
	defer nc.Close()
	const mark = "test.claimed"
	seen := make(chan *nats.Msg, 64)
	for _, subj := range []string{"$KV." + broker.SharedName + ".*.session.idkey", "$KV." + broker.SharedName + ".*." + broker.OwnerKey, mark} {
		sub, err := nc.ChanSubscribe(subj, seen)
		require.NoError(t, err)
		defer func() { _ = sub.Unsubscribe() }()
	}
	require.NoError(t, nc.Flush())
	// claim starts id, its node held, and returns the claim's writes (key
	// and the condition each was sent with; sent before Start returned);
	// and, while the session runs, its id key and the owner its mark
	// names, with the token of its lease.
	type write struct{ key, cond string }
	// written returns id's writes seen since the last call: those sent on
	// the runtime's connection before the mark sent on it now.
	written := func(id string) []write {
		require.NoError(t, r.broker.Conn().Publish(mark, nil))
		var got []write
		for m := range seen {
			if m.Subject == mark {
				break
			}
			if key, ok := strings.CutPrefix(m.Subject, "$KV."+broker.SharedName+"."+id+"."); ok {
				got = append(got, write{key, m.Header.Get(jetstream.ExpectedLastSubjSeqHeader)})
			}
		}
		return got
	}
	claim := func(id string) ([]write, []byte, session.Owner, string) {
		release := make(chan struct{})
		r.waitFor(nil, release)
		s, err := session.Start(ctx, r.durable(waits, id))
		require.NoError(t, err)
		defer func() {
			close(release)
			rep, err := s.Wait(ctx)
			require.NoError(t, err)
			require.Equal(t, "success", rep.Status)
		}()
		got := written(id)
		shared, err := r.broker.JetStream().KeyValue(ctx, broker.SharedName)
		require.NoError(t, err)
		k, err := shared.Get(ctx, id+".session.idkey")
		require.NoError(t, err)
		e, err := shared.Get(ctx, id+"."+broker.OwnerKey)
		require.NoError(t, err)
		var owner session.Owner
		require.NoError(t, json.Unmarshal(e.Value(), &owner))
		o, err := session.ReadOwner(ctx, r.broker, id, time.Now())
		require.NoError(t, err)
		require.NotNil(t, o)
		return got, k.Value(), owner, o.Token
	}

	got, _, owner, token := claim("claim1")
	require.Equal(t, []write{{"session.idkey", "0"}, {broker.OwnerKey, "0"}}, got,
		"the id key, then the mark, each written only if nothing is there")
	require.Equal(t, token, owner.Token, "the mark is the lease holder's")

	// What a start that crashed after its claim left: a key and a mark
	// of another owner, no record of a session.
	shared, err := r.broker.JetStream().KeyValue(ctx, broker.SharedName)
	require.NoError(t, err)
	left := []byte("0123456789abcdef0123456789abcdef")
	_, err = shared.Put(ctx, "claim2.session.idkey", left)
	require.NoError(t, err)
	_, err = shared.Put(ctx, "claim2."+broker.OwnerKey, []byte(`{"host":"gone","pid":1,"token":"feedfacefeedface"}`))
	require.NoError(t, err)
	require.Len(t, written("claim2"), 2, "the test's own two writes")
	got, key, owner, token := claim("claim2")
	// Nothing is read before the claim (the store is not asked whether
	// the id is there): its two create-only writes are refused, the key
	// there is read and the mark written again.
	require.Equal(t, []write{{"session.idkey", "0"}, {broker.OwnerKey, "0"}, {broker.OwnerKey, ""}}, got,
		"the claim refused, the key there read, the mark written again")
	require.Equal(t, left, key, "the id key there is kept")
	require.Equal(t, token, owner.Token, "the mark is the lease holder's")
}
