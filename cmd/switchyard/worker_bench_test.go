package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/internal/brokertest"
)

// BenchmarkWorkerPool runs a session whose 6 parallel branches each do a
// CPU-bound job (a shell loop) on a pool of 1 or 3 `switchyard worker`
// processes on loopback: one op is one session, start to exit. The speed-up
// of 3 workers over 1 is the ratio of the two ns/op (on a machine with at
// least 3 free cores it approaches 3; on 2 cores it cannot pass 2).
func BenchmarkWorkerPool(b *testing.B) {
	const branches = 6
	loop := `i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; echo $i`
	var src strings.Builder
	src.WriteString("digraph P { start [shape=Mdiamond]; fan [shape=component, max_parallel=6]; merge [shape=tripleoctagon]; exit [shape=Msquare]\n")
	for i := 0; i < branches; i++ {
		fmt.Fprintf(&src, "w%d [shape=parallelogram, pool=cpu, tool_command=%s]; fan -> w%d -> merge\n", i, quote(loop), i)
	}
	src.WriteString("start -> fan; merge -> exit }")
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			br := brokertest.Start(b, brokertest.Listen("outside", "admin"))
			for i := 0; i < n; i++ {
				startWorker(b, br, "admin", "--pool", "cpu", "--workdir", b.TempDir())
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s, _ := startPoolSession(b, br, src.String())
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				rep, err := s.Wait(ctx)
				cancel()
				if err != nil || rep.Status != "success" {
					b.Fatalf("session: %v %+v", err, rep)
				}
			}
		})
	}
}
