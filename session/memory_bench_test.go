package session_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/nodes/agent"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

// BenchmarkBurstMemory serves a durable reactive session and sends it
// bursts of outside envelopes — half on a queue edge, half on a latest
// edge, to mock agent nodes — and measures the live heap after each burst
// (after a GC). The live heap after the last burst must be within 10% of
// the heap after the second: nothing accumulates per envelope or firing.
//
//	go test -timeout 0 -run '^$' -bench BurstMemory -benchtime 1x ./session/
//
// Each burst is followed by an idle time (SWITCHYARD_BURST_IDLE, default
// 2m10s: the server's de-duplication window of 2 minutes and its block
// caches expire, as they would in a served session between bursts).
// SWITCHYARD_BURSTS and SWITCHYARD_BURST_SIZE change the shape (default 10
// bursts of 40,000); SWITCHYARD_HEAP_PROFILES=DIR writes a heap profile
// after each burst; SWITCHYARD_BURST_DEBUG=1 logs the store's streams and
// what the checkpoint keeps at the end.
func BenchmarkBurstMemory(b *testing.B) {
	bursts, size := envInt("SWITCHYARD_BURSTS", 10), envInt("SWITCHYARD_BURST_SIZE", 40000)
	profiles := os.Getenv("SWITCHYARD_HEAP_PROFILES")
	idle := 130 * time.Second
	if d, err := time.ParseDuration(os.Getenv("SWITCHYARD_BURST_IDLE")); err == nil {
		idle = d
	}
	for i := 0; i < b.N; i++ {
		heaps := burstMemory(b, bursts, size, idle, profiles)
		for j, h := range heaps {
			b.Logf("after burst %d: live heap %.1f MB", j+1, float64(h)/(1<<20))
		}
		second, last := heaps[1], heaps[len(heaps)-1]
		b.ReportMetric(float64(second)/(1<<20), "MB-heap-after-2nd")
		b.ReportMetric(float64(last)/(1<<20), "MB-heap-after-last")
		if float64(last) > 1.10*float64(second) {
			b.Fatalf("the live heap grew from %.1f MB after the 2nd burst to %.1f MB after the %dth (more than 10%%)",
				float64(second)/(1<<20), float64(last)/(1<<20), len(heaps))
		}
	}
}

func envInt(key string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil && v > 0 {
		return v
	}
	return def
}

func burstMemory(b *testing.B, bursts, size int, idle time.Duration, profiles string) []uint64 {
	br := brokertest.Start(b)
	g, diags := graph.Load("mem.dot", []byte(`digraph mem {
		kind=session
		src [prompt="source"]
		q   [prompt="queue work"]
		l   [prompt="latest status"]
		src -> q
		src -> l [delivery=latest]
	}`))
	if diags.HasErrors() {
		b.Fatal(diags)
	}
	var qDone, lDone, lDropped atomic.Int64
	mock := agent.NewMock(nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := session.Start(ctx, session.Config{ID: "mem", Graph: g, Broker: br, Durable: true, LogsDir: b.TempDir(),
		Deps: nodes.Deps{Providers: func(string) (agent.Provider, error) { return mock, nil }, DefaultProvider: "mock"},
		Observer: func(ev *pb.Event) {
			switch {
			case ev.Kind == "node.completed" && ev.Node == "q":
				qDone.Add(1)
			case ev.Kind == "node.completed" && ev.Node == "l":
				lDone.Add(1)
			case ev.Kind == "envelope.dropped" && ev.Node == "l":
				for _, kv := range ev.Attrs {
					if kv.Key == "envelopes" {
						lDropped.Add(int64(strings.Count(kv.Value, ",") + 1))
					}
				}
			}
		}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Stop()
	nc, err := br.NewConn()
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	var heaps []uint64
	half := size / 2
	for burst := 0; burst < bursts; burst++ {
		for i := 0; i < half; i++ {
			for _, to := range []string{"q", "l"} {
				env := &pb.Envelope{Id: fmt.Sprintf("b%d-%s-%d", burst, to, i), Kind: "handoff", FromNode: "src",
					Payload: &pb.Payload{Message: fmt.Sprintf("event %d of burst %d", i, burst)}}
				data, _ := protoMarshal(env)
				msg := nats.NewMsg(broker.Edge("mem", "src."+to))
				msg.Data = data
				if _, err := js.PublishMsgAsync(msg, jetstream.WithMsgID(env.Id)); err != nil {
					b.Fatal(err)
				}
			}
			if i%500 == 499 {
				select {
				case <-js.PublishAsyncComplete():
				case <-time.After(5 * time.Minute):
					b.Fatal("publishes not acknowledged")
				}
			}
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(5 * time.Minute):
			b.Fatal("publishes not acknowledged")
		}
		want := int64((burst + 1) * half)
		deadline := time.Now().Add(10 * time.Minute)
		for qDone.Load() < want || lDone.Load()+lDropped.Load() < want {
			if time.Now().After(deadline) {
				b.Fatalf("burst %d: q %d of %d, l %d + %d dropped of %d", burst+1, qDone.Load(), want, lDone.Load(), lDropped.Load(), want)
			}
			time.Sleep(50 * time.Millisecond) // polling counters in a benchmark, not a synchronisation of a test
		}
		time.Sleep(idle) // the idle time between bursts is what is measured, not a synchronisation
		runtime.GC()
		debug.FreeOSMemory()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		heaps = append(heaps, ms.HeapAlloc)
		if profiles != "" {
			f, err := os.Create(filepath.Join(profiles, fmt.Sprintf("heap-%02d.pprof", burst+1)))
			if err == nil {
				_ = pprof.WriteHeapProfile(f)
				f.Close()
			}
		}
	}
	if os.Getenv("SWITCHYARD_BURST_DEBUG") != "" {
		if cp, err := session.LoadCheckpoint(context.Background(), br, "mem", 0); err == nil {
			per := map[string]int{}
			for _, c := range cp.Consumed {
				per[c.Node]++
			}
			b.Logf("checkpoint: %d consumed ids kept %v, floors %v, %d pending", len(cp.Consumed), per, cp.Floors, len(cp.Pending))
		}
		for name := range js.StreamNames(context.Background()).Name() {
			st, err := js.Stream(context.Background(), name)
			if err == nil {
				info, _ := st.Info(context.Background())
				b.Logf("stream %s: %d msgs, %d subjects, %d deleted", name, info.State.Msgs, info.State.NumSubjects, info.State.NumDeleted)
			}
		}
	}
	return heaps
}

func protoMarshal(env *pb.Envelope) ([]byte, error) { return proto.Marshal(env) }
