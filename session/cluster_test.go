package session_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

const clusterGraph = `digraph q { kind="session"; stall_after=0
	src [prompt="never fires"]
	work [shape=diamond]
	src -> work [delivery=queue]
}`

// TestClusterReplicas runs a durable session with --replicas 3 on a
// cluster of three in-process nats-servers (routes, clustered JetStream):
// its stream, buckets and object store have three replicas; it keeps
// running when the server its connection uses is killed, and after that
// server comes back; every envelope, published until acknowledged, fires
// the node exactly once. A resume that asks for one replica scales nothing
// down.
func TestClusterReplicas(t *testing.T) {
	ctx, cl, b := onCluster(t, 4*time.Minute)
	pubConn, err := b.NewConn()
	require.NoError(t, err)
	defer pubConn.Close()
	pubJS, err := jetstream.New(pubConn)
	require.NoError(t, err)

	r := &run{t: t, broker: b}
	cfg := r.config(r.load(clusterGraph))
	cfg.ID, cfg.Durable, cfg.LogsDir, cfg.Replicas = "r3", true, "", 3
	var mu sync.Mutex
	firedAt := map[int]time.Time{}
	count := 0
	cfg.Observer = func(ev *pb.Event) {
		if ev.Kind == "node.completed" && ev.Node == "work" {
			mu.Lock()
			count++
			firedAt[count] = time.Now()
			mu.Unlock()
		}
	}
	s, err := session.Start(ctx, cfg)
	require.NoError(t, err)

	for _, name := range []string{broker.StreamName("r3"), "KV_" + broker.KVName("r3"), "KV_" + broker.LeaseBucket, "OBJ_" + broker.ObjectsName("r3")} {
		st, err := b.JetStream().Stream(ctx, name)
		require.NoError(t, err, name)
		require.Equal(t, 3, st.CachedInfo().Config.Replicas, name)
	}

	publish := func(from, to int) {
		for i := from; i < to; i++ {
			id := "ev" + strconv.Itoa(i)
			for {
				pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
				_, err := pubJS.Publish(pctx, "sy.r3.edge.src.work",
					[]byte(`{"kind":"handoff","payload":{"message":"`+id+`"}}`), jetstream.WithMsgID(id))
				pcancel()
				if err == nil {
					break
				}
				require.NoError(t, ctx.Err(), "not acknowledged: %v", err)
			}
		}
	}
	waitFired := func(n int) {
		for {
			mu.Lock()
			c := count
			mu.Unlock()
			if c >= n {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%d firings of %d", c, n)
			case <-time.After(20 * time.Millisecond): // polling the observer's count
			}
		}
	}

	publish(0, 50)
	waitFired(50)

	// The server the session's connection uses goes away.
	victim := cl.Index(b.Conn().ConnectedServerName())
	require.GreaterOrEqual(t, victim, 0)
	killedAt := time.Now()
	cl.Kill(victim)
	publish(50, 100)
	waitFired(100)
	mu.Lock()
	recovered := firedAt[51].Sub(killedAt)
	mu.Unlock()
	t.Logf("server %d killed: the next firing %v later", victim+1, recovered.Round(time.Millisecond))

	// It comes back; the session goes on.
	cl.Restart(victim)
	cl.WaitReady()
	publish(100, 150)
	waitFired(150)

	// The leader of the session's consumer goes away: a new leader is
	// elected and the session's pull moves to it.
	st, err := b.JetStream().Stream(ctx, broker.StreamName("r3"))
	require.NoError(t, err)
	leader := ""
	for info := range st.ListConsumers(ctx).Info() { // read to the end: the lister's goroutine ends
		if info.Cluster != nil && info.Cluster.Leader != "" && leader == "" {
			leader = info.Cluster.Leader
		}
	}
	require.NotEmpty(t, leader)
	victim = cl.Index(leader)
	killedAt = time.Now()
	cl.Kill(victim)
	publish(150, 200)
	waitFired(200)
	mu.Lock()
	recovered = firedAt[151].Sub(killedAt)
	mu.Unlock()
	t.Logf("consumer leader %s killed: the next firing %v later", leader, recovered.Round(time.Millisecond))
	cl.Restart(victim)
	cl.WaitReady()

	s.Stop()
	mu.Lock()
	require.Equal(t, 200, count, "each envelope fired the node once")
	mu.Unlock()

	hist, err := session.History(ctx, b, "r3")
	require.NoError(t, err)
	consumed := map[string]int{}
	for _, h := range hist {
		for _, id := range h.ConsumedIDs {
			consumed[id]++
		}
	}
	require.Len(t, consumed, 200)
	for id, n := range consumed {
		require.Equal(t, 1, n, id)
	}

	// Resuming with one replica scales nothing down.
	cfg.Replicas = 1
	s2, err := session.Resume(ctx, cfg)
	require.NoError(t, err)
	s2.Stop()
	for _, name := range []string{broker.StreamName("r3"), "KV_" + broker.KVName("r3")} {
		st, err := b.JetStream().Stream(ctx, name)
		require.NoError(t, err, name)
		require.Equal(t, 3, st.CachedInfo().Config.Replicas, name)
	}
}

// TestClusterStreamServerRestart: with one replica, the server that holds
// the session's stream restarts; the session's consumers pull again within
// seconds of its return (a pull left on the server that went away is
// noticed by its missing heartbeats).
func TestClusterStreamServerRestart(t *testing.T) {
	ctx, cl, b := onCluster(t, 4*time.Minute)
	r := &run{t: t, broker: b}
	cfg := r.durable(clusterGraph, "r1")
	fired := make(chan time.Time, 16)
	cfg.Observer = func(ev *pb.Event) {
		if ev.Kind == "node.completed" && ev.Node == "work" {
			fired <- time.Now()
		}
	}
	s, err := session.Start(ctx, cfg)
	require.NoError(t, err)
	defer s.Stop()
	st, err := b.JetStream().Stream(ctx, broker.StreamName("r1"))
	require.NoError(t, err)
	holder := st.CachedInfo().Cluster.Leader
	victim := cl.Index(holder)
	require.GreaterOrEqual(t, victim, 0)
	publish := func(id string) {
		for {
			pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := b.JetStream().Publish(pctx, "sy.r1.edge.src.work", []byte(`{"kind":"handoff"}`), jetstream.WithMsgID(id))
			pcancel()
			if err == nil {
				return
			}
			require.NoError(t, ctx.Err(), "not acknowledged: %v", err)
		}
	}
	publish("before")
	<-fired
	cl.Kill(victim)
	cl.Restart(victim)
	back := time.Now()
	publish("after") // acknowledged once the stream is back
	acked := time.Now()
	select {
	case at := <-fired:
		t.Logf("stream's server %s restarted: acknowledged %v after its return, fired %v after it",
			holder, acked.Sub(back).Round(time.Millisecond), at.Sub(acked).Round(time.Millisecond))
		require.Less(t, at.Sub(acked), 10*time.Second, "the consumer pulls again within seconds")
	case <-ctx.Done():
		t.Fatal("never fired after the restart")
	}
}
