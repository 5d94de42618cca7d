package broker_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/internal/brokertest"
)

// client connects to url with opts, sending asynchronous errors (the
// permission violations) to the returned channel.
func client(t *testing.T, url string, opts ...nats.Option) (*nats.Conn, <-chan error) {
	t.Helper()
	errs := make(chan error, 16)
	opts = append(opts, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case errs <- err:
		default:
		}
	}))
	nc, err := nats.Connect(url, opts...)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc, errs
}

// watchAll subscribes the runtime's admin connection to everything.
func watchAll(t *testing.T, b *broker.Broker) <-chan *nats.Msg {
	t.Helper()
	got := make(chan *nats.Msg, 16)
	sub, err := b.Conn().ChanSubscribe("sy.>", got)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	require.NoError(t, b.Conn().Flush())
	return got
}

func TestListeningRequiresCredentials(t *testing.T) {
	b := brokertest.Start(t, brokertest.Listen("outside-secret", "admin-secret"))
	url := b.ClientURL()
	require.True(t, strings.HasPrefix(url, "nats://127.0.0.1:"), url)
	for name, opts := range map[string][]nats.Option{
		"none":                nil,
		"wrong token":         {nats.Token("wrong")},
		"runtime user":        {nats.UserInfo("switchyard-runtime", "")},
		"runtime user, token": {nats.UserInfo("switchyard-runtime", "outside-secret")},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := nats.Connect(url, opts...)
			require.ErrorIs(t, err, nats.ErrAuthorization)
		})
	}
}

// TestOutsidePermissions: an outside user may publish on node inboxes and
// edges and read events; a publish on a control subject or a Stored
// subject is denied, and the
// denial arrives on the asynchronous error handler.
func TestOutsidePermissions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		options []brokertest.Option
		creds   nats.Option
	}{
		{"token", []brokertest.Option{brokertest.Listen("outside-secret", "admin-secret")}, nats.Token("outside-secret")},
		{"user and password", []brokertest.Option{brokertest.Configure(func(c *broker.Config) {
			c.Listen, c.User, c.Password = "127.0.0.1:0", "alice", "pw"
		})}, nats.UserInfo("alice", "pw")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := brokertest.Start(t, tc.options...)
			got := watchAll(t, b)
			out, denied := client(t, b.ClientURL(), tc.creds)

			require.NoError(t, out.Publish(broker.Control("s1", "trigger"), []byte("x")))
			require.NoError(t, out.Publish(broker.NodeIn("s1", "a"), []byte("inbox")))
			require.NoError(t, out.Publish(broker.Edge("s1", "a.b"), []byte("edge")))
			require.NoError(t, out.Flush())

			err := recv(t, denied, 10*time.Second, "permission violation")
			require.True(t, errors.Is(err, nats.ErrPermissionViolation), "got %v", err)
			require.Contains(t, err.Error(), broker.Control("s1", "trigger"))
			require.Equal(t, broker.NodeIn("s1", "a"), recv(t, got, 10*time.Second, "inbox publish").Subject)
			require.Equal(t, broker.Edge("s1", "a.b"), recv(t, got, 10*time.Second, "edge publish").Subject)
			// The work stream's own subjects are the runtime's: only the
			// session stores there, after checking what it stores.
			require.NoError(t, out.Publish(broker.Stored(broker.Edge("s1", "a.b")), []byte("stored")))
			require.NoError(t, out.Flush())
			err = recv(t, denied, 10*time.Second, "permission violation")
			require.Contains(t, err.Error(), broker.Stored(broker.Edge("s1", "a.b")))

			// Events can be read; control subjects and the JetStream API cannot.
			evts := make(chan *nats.Msg, 1)
			_, err = out.ChanSubscribe(broker.AllEvents("s1"), evts)
			require.NoError(t, err)
			_, err = out.SubscribeSync(broker.Control("s1", "trigger"))
			require.NoError(t, err) // the denial is asynchronous
			require.NoError(t, out.Flush())
			err = recv(t, denied, 10*time.Second, "subscription denial")
			require.True(t, errors.Is(err, nats.ErrPermissionViolation), "got %v", err)
			require.Contains(t, err.Error(), "Subscription")
			require.NoError(t, b.Conn().Publish(broker.Event("s1", "node.completed"), []byte("e")))
			require.Equal(t, "e", string(recv(t, evts, 10*time.Second, "event").Data))

			require.NoError(t, out.Publish("$JS.API.STREAM.LIST", nil))
			require.NoError(t, out.Flush())
			err = recv(t, denied, 10*time.Second, "JetStream API denial")
			require.Contains(t, err.Error(), "$JS.API.STREAM.LIST")
		})
	}
}

func TestAdminsHaveEveryPermission(t *testing.T) {
	b := brokertest.Start(t, brokertest.Listen("outside-secret", "admin-secret"))
	got := watchAll(t, b)

	admin, errs := client(t, b.ClientURL(), nats.Token("admin-secret"))
	require.NoError(t, admin.Publish(broker.Control("s1", "trigger"), []byte("y")))
	require.Equal(t, broker.Control("s1", "trigger"), recv(t, got, 10*time.Second, "admin publish").Subject)

	// The runtime's in-process connections are admins too.
	rt, err := b.NewConn()
	require.NoError(t, err)
	defer rt.Close()
	require.NoError(t, rt.Publish(broker.Control("s1", "pause"), []byte("z")))
	require.Equal(t, broker.Control("s1", "pause"), recv(t, got, 10*time.Second, "runtime publish").Subject)
	_, err = broker.EnsureSessionStream(ctx(t), b.JetStream(), "s1", broker.FileStorage)
	require.NoError(t, err)

	require.NoError(t, admin.Flush())
	select {
	case err := <-errs:
		t.Fatalf("an admin was denied: %v", err)
	default:
	}
}

func TestPrivateInboxName(t *testing.T) {
	for name, ok := range map[string]bool{
		"abcdefghijklmnop": true, "switchyard_cli_9Tan-TG4kwXSNnX": true,
		"short": false, "": false, "abcdefghijklmnop.": false, "abcdefghijklmnop*": false, "abcdefghijklmn>p": false,
		"NATS CLI Version 0.4.0": false, strings.Repeat("a", 65): false,
	} {
		require.Equal(t, ok, broker.PrivateInboxName(name), "%q", name)
	}
	opts := nats.GetDefaultOptions()
	for _, o := range broker.PrivateInbox("x_") {
		require.NoError(t, o(&opts))
	}
	require.True(t, broker.PrivateInboxName(opts.Name), opts.Name)
	require.Equal(t, "_INBOX."+opts.Name, opts.InboxPrefix)
}

// TestWorkerPermissions: a worker (Config.WorkerToken) may pull, keep alive
// and acknowledge its pools' jobs (from the consumer the owner made), publish their outcomes, answer a
// request-mode job and read the graph a job names; it may not publish on a
// session's edges, inboxes or control subjects (answer a gate, stop it),
// read a session's stream, bucket or outcomes other than by publishing, nor
// change the work stream or make consumers.
func TestWorkerPermissions(t *testing.T) {
	b := brokertest.Start(t, brokertest.Listen("outside-secret", "admin-secret"),
		brokertest.Configure(func(c *broker.Config) { c.WorkerToken = "worker-secret" }))
	ctx := ctx(t)
	adm := b.JetStream()
	// What the owner makes (package pool's names, docs/workers.md).
	_, err := adm.CreateStream(ctx, jetstream.StreamConfig{Name: "SY_WORK", Subjects: []string{"syw.>"},
		Retention: jetstream.WorkQueuePolicy})
	require.NoError(t, err)
	_, err = adm.CreateOrUpdateConsumer(ctx, "SY_WORK", jetstream.ConsumerConfig{Durable: "pool_cpu",
		FilterSubject: "syw.cpu.>", AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	graphs, err := adm.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "sy_work_graphs"})
	require.NoError(t, err)
	_, err = graphs.Put(ctx, "g1", []byte("digraph g {}"))
	require.NoError(t, err)
	_, err = broker.EnsureSessionStream(ctx, adm, "s1", broker.FileStorage)
	require.NoError(t, err)
	journal, err := broker.SessionKV(ctx, adm, "s1", broker.FileStorage)
	require.NoError(t, err)
	_, err = journal.Put(ctx, "journal.1", []byte("secret"))
	require.NoError(t, err)
	_, err = adm.Publish(ctx, "syw.cpu.s1.n", []byte("job"))
	require.NoError(t, err)
	got := watchAll(t, b)
	outcomes := make(chan *nats.Msg, 4)
	osub, err := b.Conn().ChanSubscribe("syo.>", outcomes)
	require.NoError(t, err)
	defer func() { _ = osub.Unsubscribe() }()
	require.NoError(t, b.Conn().Flush())

	wc, denied := client(t, b.ClientURL(), append(broker.PrivateInbox("worker_"), nats.Token("worker-secret"))...)
	js, err := jetstream.New(wc)
	require.NoError(t, err)

	t.Run("may", func(t *testing.T) {
		_, err := js.Stream(ctx, "SY_WORK")
		require.NoError(t, err)
		cons, err := js.Consumer(ctx, "SY_WORK", "pool_cpu")
		require.NoError(t, err)
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		require.NoError(t, err)
		require.Equal(t, "job", string(m.Data()))
		require.NoError(t, m.InProgress())
		require.NoError(t, wc.Publish("syo.s1.n.1.1", []byte("outcome")))
		require.Equal(t, "outcome", string(recv(t, outcomes, 10*time.Second, "outcome").Data))
		require.NoError(t, m.DoubleAck(ctx))
		kv, err := js.KeyValue(ctx, "sy_work_graphs")
		require.NoError(t, err)
		e, err := kv.Get(ctx, "g1")
		require.NoError(t, err)
		require.Equal(t, "digraph g {}", string(e.Value()))
		// A request-mode job: one answer.
		sub, err := wc.Subscribe("syr.>", func(m *nats.Msg) { _ = m.Respond([]byte("done")) })
		require.NoError(t, err)
		defer func() { _ = sub.Unsubscribe() }()
		require.NoError(t, wc.Flush())
		rep, err := b.Conn().Request("syr.cpu.s1.n", []byte("job"), 10*time.Second)
		require.NoError(t, err)
		require.Equal(t, "done", string(rep.Data))
		select {
		case err := <-denied:
			t.Fatalf("a worker was denied: %v", err)
		default:
		}
	})

	t.Run("may not publish", func(t *testing.T) {
		for _, subj := range []string{
			broker.Control("s1", "answer"), broker.Control("s1", "stop"), broker.Control("s1", "trigger"),
			broker.Edge("s1", "a.b"), broker.NodeIn("s1", "a"),
			"$JS.API.STREAM.INFO.SY_s1", "$JS.API.DIRECT.GET.KV_sy_kv_s1.$KV.sy_kv_s1.journal.1",
			"$JS.API.STREAM.MSG.GET.KV_sy_kv_s1", "$KV.sy_kv_s1.journal.1",
			"$JS.API.STREAM.DELETE.SY_WORK", "$JS.API.STREAM.UPDATE.SY_WORK", "$JS.API.STREAM.PURGE.SY_WORK",
			"$JS.API.CONSUMER.DELETE.SY_WORK.pool_cpu", "$JS.API.CONSUMER.MSG.NEXT.SY_s1.n_a",
			// No consumer of its own: its filter or its push subject would
			// reach beyond the role.
			"$JS.API.CONSUMER.CREATE.SY_WORK.pool_cpu.syw.>", "$JS.API.CONSUMER.CREATE.SY_WORK.pool_x",
			"$JS.API.CONSUMER.DURABLE.CREATE.SY_WORK.pool_x",
			"$JS.API.STREAM.CREATE.SY_s2",
		} {
			require.NoError(t, wc.Publish(subj, []byte("x")))
			require.NoError(t, wc.Flush())
			err := recv(t, denied, 10*time.Second, "denial of "+subj)
			require.Contains(t, err.Error(), subj)
		}
		select {
		case m := <-got:
			t.Fatalf("a worker's publish on %s went through", m.Subject)
		default:
		}
	})

	t.Run("may not subscribe", func(t *testing.T) {
		for _, subj := range []string{"sy.>", "sy.s1.edge.>", "syo.>", "syw.>", "$KV.>", "_SYRT.>", "_INBOX.>"} {
			_, err := wc.SubscribeSync(subj)
			require.NoError(t, err)
			require.NoError(t, wc.Flush())
			err = recv(t, denied, 10*time.Second, "denial of "+subj)
			require.Contains(t, err.Error(), "Subscription")
		}
	})
}
