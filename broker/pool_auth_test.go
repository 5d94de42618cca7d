package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/internal/brokertest"
)

// TestPoolTokenPermissions: a worker with pool gpu's token (Config.PoolTokens)
// pulls, keeps alive and acknowledges gpu's jobs and answers its
// request-mode jobs; pool cpu's consumer, jobs, acknowledgements and
// requests are refused it. The worker token of any pool still serves both.
func TestPoolTokenPermissions(t *testing.T) {
	b := brokertest.Start(t, brokertest.Listen("outside-secret", "admin-secret"),
		brokertest.Configure(func(c *broker.Config) {
			c.WorkerToken = "any-pool"
			c.PoolTokens = map[string]string{"gpu": "gpu-secret", "cpu": "cpu-secret"}
		}))
	ctx := ctx(t)
	adm := b.JetStream()
	// What the owners make (package pool's names, docs/workers.md).
	_, err := adm.CreateStream(ctx, jetstream.StreamConfig{Name: "SY_WORK", Subjects: []string{"syw.>"},
		Retention: jetstream.WorkQueuePolicy})
	require.NoError(t, err)
	for _, p := range []string{"cpu", "gpu"} {
		_, err = adm.CreateOrUpdateConsumer(ctx, "SY_WORK", jetstream.ConsumerConfig{Durable: "pool_" + p,
			FilterSubject: "syw." + p + ".>", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute})
		require.NoError(t, err)
		_, err = adm.Publish(ctx, "syw."+p+".s1.n.1.1", []byte(p+" job"))
		require.NoError(t, err)
	}

	gpu, denied := client(t, b.ClientURL(), append(broker.PrivateInbox("worker_"), nats.Token("gpu-secret"))...)
	gjs, err := jetstream.New(gpu)
	require.NoError(t, err)
	noDenial := func(t *testing.T) {
		t.Helper()
		require.NoError(t, gpu.Flush())
		select {
		case err := <-denied:
			t.Fatalf("the gpu worker was denied: %v", err)
		default:
		}
	}

	t.Run("its own pool", func(t *testing.T) {
		cons, err := gjs.Consumer(ctx, "SY_WORK", "pool_gpu")
		require.NoError(t, err)
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		require.NoError(t, err)
		require.Equal(t, "gpu job", string(m.Data()))
		require.NoError(t, m.InProgress())
		require.NoError(t, m.DoubleAck(ctx))
		sub, err := gpu.Subscribe("syr.gpu.>", func(m *nats.Msg) { _ = m.Respond([]byte("done")) })
		require.NoError(t, err)
		defer func() { _ = sub.Unsubscribe() }()
		require.NoError(t, gpu.Flush())
		rep, err := b.Conn().Request("syr.gpu.s1.n", []byte("job"), 10*time.Second)
		require.NoError(t, err)
		require.Equal(t, "done", string(rep.Data))
		noDenial(t)
	})

	t.Run("not another pool's", func(t *testing.T) {
		short, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := gjs.Consumer(short, "SY_WORK", "pool_cpu")
		cancel()
		require.Error(t, err, "pool cpu's consumer")
		require.Contains(t, recv(t, denied, 10*time.Second, "denial of the consumer").Error(), "CONSUMER.INFO.SY_WORK.pool_cpu")
		// Its pull, asked by hand.
		require.NoError(t, gpu.PublishRequest("$JS.API.CONSUMER.MSG.NEXT.SY_WORK.pool_cpu", gpu.NewRespInbox(), []byte(`{"batch":1}`)))
		require.NoError(t, gpu.Flush())
		require.Contains(t, recv(t, denied, 10*time.Second, "denial of the pull").Error(), "MSG.NEXT.SY_WORK.pool_cpu")
		// A cpu job another worker holds: its acknowledgement subject.
		cpu, _ := client(t, b.ClientURL(), append(broker.PrivateInbox("worker_"), nats.Token("cpu-secret"))...)
		cjs, err := jetstream.New(cpu)
		require.NoError(t, err)
		cons, err := cjs.Consumer(ctx, "SY_WORK", "pool_cpu")
		require.NoError(t, err)
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		require.NoError(t, err)
		require.Equal(t, "cpu job", string(m.Data()))
		require.NoError(t, gpu.Publish(m.Reply(), []byte("+ACK")))
		require.NoError(t, gpu.Flush())
		require.Contains(t, recv(t, denied, 10*time.Second, "denial of the ack").Error(), m.Reply())
		info, err := cons.Info(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, info.NumAckPending, "the cpu job is still its worker's")
		// Its request-mode jobs.
		_, err = gpu.SubscribeSync("syr.cpu.>")
		require.NoError(t, err)
		require.NoError(t, gpu.Flush())
		require.Contains(t, recv(t, denied, 10*time.Second, "denial of cpu's requests").Error(), "Subscription")
		_, err = gpu.SubscribeSync("syr.>")
		require.NoError(t, err)
		require.NoError(t, gpu.Flush())
		require.Contains(t, recv(t, denied, 10*time.Second, "denial of every pool's requests").Error(), "Subscription")
		require.NoError(t, m.DoubleAck(ctx), "its own worker acknowledges it")
	})

	t.Run("the worker token serves any pool", func(t *testing.T) {
		any, denied := client(t, b.ClientURL(), append(broker.PrivateInbox("worker_"), nats.Token("any-pool"))...)
		ajs, err := jetstream.New(any)
		require.NoError(t, err)
		for _, p := range []string{"cpu", "gpu"} {
			_, err := adm.Publish(ctx, "syw."+p+".s1.n.2.1", []byte(p+" job 2"))
			require.NoError(t, err)
			cons, err := ajs.Consumer(ctx, "SY_WORK", "pool_"+p)
			require.NoError(t, err)
			m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
			require.NoError(t, err)
			require.Equal(t, p+" job 2", string(m.Data()))
			require.NoError(t, m.DoubleAck(ctx))
		}
		select {
		case err := <-denied:
			t.Fatalf("the any-pool worker was denied: %v", err)
		default:
		}
	})
}

func TestPoolTokensValidated(t *testing.T) {
	base := broker.Config{Memory: true, Listen: "127.0.0.1:0", Token: "out", AdminToken: "adm", WorkerToken: "wk"}
	for name, c := range map[string]map[string]string{
		"bad pool name":        {"g.pu": "x"},
		"empty token":          {"gpu": ""},
		"the outside token":    {"gpu": "out"},
		"the admin token":      {"gpu": "adm"},
		"the worker token":     {"gpu": "wk"},
		"two pools, one token": {"gpu": "same", "cpu": "same"},
	} {
		cfg := base
		cfg.PoolTokens = c
		require.Error(t, cfg.Validate(), name)
	}
	cfg := base
	cfg.PoolTokens = map[string]string{"gpu": "g", "cpu": "c"}
	require.NoError(t, cfg.Validate())
}
