package broker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/internal/brokertest"
)

func TestSessionStream(t *testing.T) {
	b := brokertest.Start(t)
	js := b.JetStream()
	st, err := broker.EnsureSessionStream(ctx(t), js, "s-1", broker.FileStorage)
	require.NoError(t, err)
	_, err = js.Stream(ctx(t), broker.DeadLetterStreamName("s-1"))
	require.ErrorIs(t, err, jetstream.ErrStreamNotFound, "dead letters get their stream when the first one comes")
	_, err = broker.EnsureDeadLetters(ctx(t), js, "s-1", broker.FileStorage)
	require.NoError(t, err)
	info, err := st.Info(ctx(t))
	require.NoError(t, err)
	require.Equal(t, "SY_s-1", info.Config.Name)
	require.Equal(t, jetstream.FileStorage, info.Config.Storage)
	require.Equal(t, broker.DefaultDuplicateWindow, info.Config.Duplicates)

	t.Run("publish is acknowledged and de-duplicated by id", func(t *testing.T) {
		ack, err := js.Publish(ctx(t), broker.Edge("s-1", "a.b"), []byte("x"), jetstream.WithMsgID("id-1"))
		require.NoError(t, err)
		require.Equal(t, "SY_s-1", ack.Stream)
		require.False(t, ack.Duplicate)
		again, err := js.Publish(ctx(t), broker.Edge("s-1", "a.b"), []byte("x"), jetstream.WithMsgID("id-1"))
		require.NoError(t, err)
		require.True(t, again.Duplicate)
		require.Equal(t, ack.Sequence, again.Sequence)
	})

	for _, tc := range []struct {
		subj     string
		captured bool
	}{
		{broker.Edge("s-1", "a.b.2"), true},
		{broker.NodeIn("s-1", "review"), true},
		{broker.DeadLetter("s-1"), true},
		{broker.Control("s-1", "trigger"), false},
		{broker.Event("s-1", "node.completed"), false},
		{broker.Edge("s-2", "a.b"), false},
	} {
		t.Run(tc.subj, func(t *testing.T) {
			_, err := js.Publish(ctx(t), tc.subj, []byte("x"))
			if tc.captured {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, jetstream.ErrNoStreamResponse, "no stream answers for %s", tc.subj)
			}
		})
	}

	t.Run("update is idempotent", func(t *testing.T) {
		_, err := broker.EnsureSessionStream(ctx(t), js, "s-1", broker.FileStorage)
		require.NoError(t, err)
	})
	t.Run("invalid session ids are refused", func(t *testing.T) {
		for _, bad := range []string{"", "a.b", "a*", "a>", "1a", "a b"} {
			_, err := broker.EnsureSessionStream(ctx(t), js, bad, broker.FileStorage)
			require.Error(t, err, bad)
			_, err = broker.SessionKV(ctx(t), js, bad, broker.FileStorage)
			require.Error(t, err, bad)
			_, err = broker.SessionObjects(ctx(t), js, bad, broker.FileStorage)
			require.Error(t, err, bad)
			_, err = broker.EnsureEventStream(ctx(t), js, bad, broker.FileStorage, broker.EventRetention{})
			require.Error(t, err, bad)
			require.Error(t, broker.DeleteSession(ctx(t), js, bad), bad)
		}
	})
	t.Run("ids naming another stream of the store are refused", func(t *testing.T) {
		// Session s-1's event stream and the pools' work queue.
		_, err := broker.EnsureEventStream(ctx(t), js, "s-1", broker.FileStorage, broker.EventRetention{})
		require.NoError(t, err)
		for _, bad := range []string{"WORK", "s-1_EVT"} {
			_, err := broker.EnsureSessionStream(ctx(t), js, bad, broker.FileStorage)
			require.ErrorContains(t, err, "is reserved", bad)
			require.ErrorContains(t, broker.DeleteSession(ctx(t), js, bad), "is reserved", bad)
		}
		_, err = js.Stream(ctx(t), broker.EventStreamName("s-1"))
		require.NoError(t, err, "s-1's event stream is still there")
	})
}

// TestControlRequestsAreAnsweredByTheSession checks that the work stream
// does not capture control subjects: if it did, JetStream would answer a
// control request with a publish acknowledgement, racing the session.
func TestControlRequestsAreAnsweredByTheSession(t *testing.T) {
	b := brokertest.Start(t)
	_, err := broker.EnsureSessionStream(ctx(t), b.JetStream(), "s1", broker.FileStorage)
	require.NoError(t, err)
	sub, err := b.Conn().Subscribe(broker.Control("s1", "explain"), func(m *nats.Msg) { _ = m.Respond([]byte("from the session")) })
	require.NoError(t, err)
	defer func() { require.NoError(t, sub.Unsubscribe()) }()
	require.NoError(t, b.Conn().Flush()) // the server knows the responder

	client, err := b.NewConn()
	require.NoError(t, err)
	defer client.Close()
	inbox := nats.NewInbox()
	replies := make(chan *nats.Msg, 4)
	rs, err := client.ChanSubscribe(inbox, replies)
	require.NoError(t, err)
	defer func() { require.NoError(t, rs.Unsubscribe()) }()
	require.NoError(t, client.PublishRequest(broker.Control("s1", "explain"), inbox, []byte("{}")))
	require.NoError(t, client.Flush())
	m := recv(t, replies, 10*time.Second, "reply")
	require.Equal(t, "from the session", string(m.Data))
	// A second reply (a JetStream ack) would have been sent before the
	// session's if the stream captured the request; a round trip on the
	// same connection orders after it.
	require.NoError(t, client.Flush())
	require.NoError(t, b.Conn().Flush())
	select {
	case extra := <-replies:
		t.Fatalf("a second reply: %q", extra.Data)
	default:
	}
}

func TestSessionKVAndObjects(t *testing.T) {
	for _, st := range []broker.Storage{broker.FileStorage, broker.MemoryStorage} {
		t.Run(fmt.Sprint(st), func(t *testing.T) {
			b := brokertest.Start(t)
			js := b.JetStream()
			kv, err := broker.SessionKV(ctx(t), js, "s1", st)
			require.NoError(t, err)
			_, err = kv.Put(ctx(t), "checkpoint", []byte("v1"))
			require.NoError(t, err)
			_, err = kv.Put(ctx(t), "checkpoint", []byte("v2"))
			require.NoError(t, err)
			e, err := kv.Get(ctx(t), "checkpoint")
			require.NoError(t, err)
			require.Equal(t, "v2", string(e.Value()))
			require.EqualValues(t, 2, e.Revision())
			status, err := kv.KV.Status(ctx(t))
			require.NoError(t, err)
			require.Equal(t, "sy_kv_s1", status.Bucket())

			obj, err := broker.SessionObjects(ctx(t), js, "s1", st)
			require.NoError(t, err)
			big := make([]byte, 300<<10) // several chunks
			for i := range big {
				big[i] = byte(i)
			}
			_, err = obj.PutBytes(ctx(t), "report.bin", big)
			require.NoError(t, err)
			got, err := obj.GetBytes(ctx(t), "report.bin")
			require.NoError(t, err)
			require.Equal(t, big, got)

			// A second open finds the same data.
			kv2, err := broker.SessionKV(ctx(t), js, "s1", st)
			require.NoError(t, err)
			e, err = kv2.Get(ctx(t), "checkpoint")
			require.NoError(t, err)
			require.Equal(t, "v2", string(e.Value()))
		})
	}
}

func TestEventStream(t *testing.T) {
	b := brokertest.Start(t)
	js := b.JetStream()
	st, err := broker.EnsureEventStream(ctx(t), js, "s1", broker.MemoryStorage, broker.EventRetention{MaxMsgs: 3})
	require.NoError(t, err)
	info, err := st.Info(ctx(t))
	require.NoError(t, err)
	require.Equal(t, broker.DefaultEventMaxAge, info.Config.MaxAge)
	require.Equal(t, jetstream.MemoryStorage, info.Config.Storage)

	// Events are published on core NATS, as the runtime does; the stream
	// keeps the last three.
	for i := range 5 {
		require.NoError(t, b.Conn().Publish(broker.Event("s1", "node.completed"), []byte{byte('0' + i)}))
	}
	require.NoError(t, b.Conn().Flush())
	eventually(t, 10*time.Second, 10*time.Millisecond, func() (bool, string) {
		info, err := st.Info(ctx(t))
		require.NoError(t, err)
		return info.State.LastSeq == 5, fmt.Sprintf("last sequence %d of 5", info.State.LastSeq)
	})
	info, err = st.Info(ctx(t))
	require.NoError(t, err)
	require.EqualValues(t, 3, info.State.Msgs)
	m, err := st.GetMsg(ctx(t), info.State.FirstSeq)
	require.NoError(t, err)
	require.Equal(t, "2", string(m.Data), "the oldest events are discarded")
}

func TestDeleteSession(t *testing.T) {
	b := brokertest.Start(t)
	js := b.JetStream()
	require.NoError(t, broker.DeleteSession(ctx(t), js, "s1"), "nothing to delete is not an error")

	_, err := broker.EnsureSessionStream(ctx(t), js, "s1", broker.FileStorage)
	require.NoError(t, err)
	_, err = broker.EnsureEventStream(ctx(t), js, "s1", broker.FileStorage, broker.EventRetention{})
	require.NoError(t, err)
	_, err = broker.SessionKV(ctx(t), js, "s1", broker.FileStorage)
	require.NoError(t, err)
	_, err = broker.SessionObjects(ctx(t), js, "s1", broker.FileStorage)
	require.NoError(t, err)
	_, err = broker.EnsureSessionStream(ctx(t), js, "s2", broker.FileStorage)
	require.NoError(t, err)

	require.NoError(t, broker.DeleteSession(ctx(t), js, "s1"))
	_, err = js.Stream(ctx(t), broker.StreamName("s1"))
	require.ErrorIs(t, err, jetstream.ErrStreamNotFound)
	_, err = js.Stream(ctx(t), broker.EventStreamName("s1"))
	require.ErrorIs(t, err, jetstream.ErrStreamNotFound)
	_, err = js.KeyValue(ctx(t), broker.KVName("s1"))
	require.ErrorIs(t, err, jetstream.ErrBucketNotFound)
	_, err = js.ObjectStore(ctx(t), broker.ObjectsName("s1"))
	require.ErrorIs(t, err, jetstream.ErrBucketNotFound)
	_, err = js.Stream(ctx(t), broker.StreamName("s2"))
	require.NoError(t, err, "other sessions are left alone")
}

// TestWorkStreamInbound: with Inbound, the work stream stores exactly the
// subjects given (sorted, once each) and no other inbox or edge of the
// session; SetInbound changes them on the existing stream, keeping the
// messages it holds; past MaxListedSubjects the stream stores the
// session's Stored subjects instead, and both while the mode changes.
func TestWorkStreamInbound(t *testing.T) {
	b := brokertest.Start(t)
	js := b.JetStream()
	in := []string{broker.NodeIn("w", "b"), broker.Edge("w", "a.b"), broker.NodeIn("w", "a"), broker.NodeIn("w", "a")}
	st, err := broker.EnsureSessionStream(ctx(t), js, "w", broker.MemoryStorage, broker.Inbound(in))
	require.NoError(t, err)
	require.Equal(t, []string{"sy.w.edge.a.b", "sy.w.node.a.in", "sy.w.node.b.in"}, st.CachedInfo().Config.Subjects)
	stored := func(subj string) bool {
		_, err := js.Publish(ctx(t), subj, []byte("x"))
		if err != nil {
			require.ErrorIs(t, err, jetstream.ErrNoStreamResponse, subj)
		}
		return err == nil
	}
	require.True(t, stored(broker.Edge("w", "a.b")))
	require.False(t, stored(broker.NodeIn("w", "ghost")))
	require.False(t, stored(broker.Edge("w", "b.a")))

	ingress, err := broker.SetInbound(ctx(t), js, "w", []string{broker.NodeIn("w", "a"), broker.NodeIn("w", "c"), broker.Edge("w", "a.c")}, nil)
	require.NoError(t, err)
	require.False(t, ingress)
	require.True(t, stored(broker.NodeIn("w", "c")))
	require.False(t, stored(broker.Edge("w", "a.b")))
	info, err := st.Info(ctx(t))
	require.NoError(t, err)
	require.Equal(t, uint64(2), info.State.Msgs, "what it held stays")

	many := make([]string, broker.MaxListedSubjects+1)
	for i := range many {
		many[i] = broker.NodeIn("w", fmt.Sprintf("n%d", i))
	}
	// Past the limit the stream stores the session's own subjects, and
	// no inbox or edge: across the change of mode it stores both.
	var during []string
	ingress, err = broker.SetInbound(ctx(t), js, "w", many, func(ingress bool) {
		require.True(t, ingress)
		info, err := st.Info(ctx(t))
		require.NoError(t, err)
		during = info.Config.Subjects
	})
	require.NoError(t, err)
	require.True(t, ingress)
	require.Equal(t, []string{"sy.w.edge.a.c", "sy.w.node.a.in", "sy.w.node.c.in", "sy.w.w.>"}, during)
	require.False(t, stored(broker.NodeIn("w", "n1")), "past the limit: no inbox")
	require.False(t, stored(broker.Edge("w", "a.c")), "and no edge")
	require.True(t, stored(broker.Stored(broker.NodeIn("w", "n1"))), "but their Stored subjects")
	require.True(t, stored(broker.Stored(broker.Edge("w", "x.y.2"))))

	// And back.
	ingress, err = broker.SetInbound(ctx(t), js, "w", in, nil)
	require.NoError(t, err)
	require.False(t, ingress)
	require.True(t, stored(broker.NodeIn("w", "a")))
	require.False(t, stored(broker.Stored(broker.NodeIn("w", "a"))))
	info, err = st.Info(ctx(t))
	require.NoError(t, err)
	require.Equal(t, uint64(5), info.State.Msgs, "what it held stays")

	_, err = broker.SetInbound(ctx(t), js, "nosuch", in, nil)
	require.Error(t, err)
}

// TestFreshOverExisting: resources asked for as fresh (a session being
// created) that exist already — what an interrupted start left — are
// taken as they are or updated to the configuration asked for, keeping
// what they hold.
func TestFreshOverExisting(t *testing.T) {
	b := brokertest.Start(t)
	js := b.JetStream()
	a, bb := broker.Edge("f-1", "a.b"), broker.Edge("f-1", "b.c")
	_, err := broker.EnsureSessionStream(ctx(t), js, "f-1", broker.FileStorage, broker.Inbound([]string{a}), broker.Fresh())
	require.NoError(t, err)
	_, err = js.Publish(ctx(t), a, []byte("x"))
	require.NoError(t, err)
	kv, err := broker.SessionKV(ctx(t), js, "f-1", broker.FileStorage, broker.Fresh())
	require.NoError(t, err)
	_, err = kv.Put(ctx(t), "k", []byte("v"))
	require.NoError(t, err)

	st, err := broker.EnsureSessionStream(ctx(t), js, "f-1", broker.FileStorage, broker.Inbound([]string{a, bb}), broker.Fresh())
	require.NoError(t, err)
	info, err := st.Info(ctx(t))
	require.NoError(t, err)
	require.Equal(t, []string{a, bb}, info.Config.Subjects, "updated to the subjects asked for")
	require.EqualValues(t, 1, info.State.Msgs, "what it held stays")
	_, err = broker.EnsureSessionStream(ctx(t), js, "f-1", broker.FileStorage, broker.Inbound([]string{a, bb}), broker.Fresh())
	require.NoError(t, err, "the same configuration again")
	kv, err = broker.SessionKV(ctx(t), js, "f-1", broker.FileStorage, broker.Fresh())
	require.NoError(t, err)
	e, err := kv.Get(ctx(t), "k")
	require.NoError(t, err)
	require.Equal(t, "v", string(e.Value()))
}

// TestLeasesAgeOut: the lease bucket forgets what nobody writes any more
// (the marker a released lease leaves, one per session ever run) after
// LeaseMaxAge — a new bucket from its creation, the bucket of an older
// store once a collection ages it.
func TestLeasesAgeOut(t *testing.T) {
	b := brokertest.Start(t)
	js := b.JetStream()
	maxAge := func() time.Duration {
		t.Helper()
		s, err := js.Stream(ctx(t), "KV_"+broker.LeaseBucket)
		require.NoError(t, err)
		return s.CachedInfo().Config.MaxAge
	}
	_, err := broker.Leases(ctx(t), js, broker.FileStorage)
	require.NoError(t, err)
	require.Equal(t, broker.LeaseMaxAge, maxAge())

	// The bucket as an older store has it: no maximum age. (Changed in
	// place: deleting the stream and making it again under the same name
	// raced, under load, with the server's removal of the old one's
	// directory — "could not create storage directory".)
	s, err := js.Stream(ctx(t), "KV_"+broker.LeaseBucket)
	require.NoError(t, err)
	cfg := s.CachedInfo().Config
	cfg.MaxAge = 0
	_, err = js.UpdateStream(ctx(t), cfg)
	require.NoError(t, err)
	kv, err := js.KeyValue(ctx(t), broker.LeaseBucket)
	require.NoError(t, err)
	_, err = kv.Put(ctx(t), "s1", []byte("owner"))
	require.NoError(t, err)
	require.Zero(t, maxAge(), "a bucket of an older store keeps everything")
	require.NoError(t, broker.AgeLeases(ctx(t), js))
	require.Equal(t, broker.LeaseMaxAge, maxAge())
	require.NoError(t, broker.AgeLeases(ctx(t), js), "again: nothing to change")
	e, err := kv.Get(ctx(t), "s1")
	require.NoError(t, err)
	require.Equal(t, "owner", string(e.Value()), "a live lease is kept")
}

// TestSessionOfStream: a session's work stream and object store are told
// by name and description; streams named like them are not theirs.
func TestSessionOfStream(t *testing.T) {
	ctx := ctx(t)
	js := brokertest.Start(t).JetStream()
	_, err := broker.EnsureSessionStream(ctx, js, "s1", broker.MemoryStorage)
	require.NoError(t, err)
	_, err = broker.SessionObjects(ctx, js, "s2", broker.MemoryStorage)
	require.NoError(t, err)
	_, err = broker.EnsureEventStream(ctx, js, "s3", broker.MemoryStorage, broker.EventRetention{})
	require.NoError(t, err)
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: broker.StreamName("s4"), Subjects: []string{"client.s4"}, Storage: jetstream.MemoryStorage})
	require.NoError(t, err)
	got := map[string]string{}
	for info := range js.ListStreams(ctx).Info() {
		if id, ok := broker.SessionOfStream(info.Config.Name, info.Config.Description); ok {
			got[info.Config.Name] = id
		}
	}
	require.Equal(t, map[string]string{broker.StreamName("s1"): "s1", "OBJ_" + broker.ObjectsName("s2"): "s2"}, got)
}
