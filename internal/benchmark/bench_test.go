package benchmark_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard/switchyard/internal/benchmark"
)

// The Go benchmarks run the code of `switchyard bench`, one figure each, b.N
// times; the figure is reported as a metric next to ns/op.

func env(b *testing.B) *benchmark.Env {
	b.Helper()
	e, err := benchmark.NewEnv(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(e.Close)
	return e
}

// cpuTime is the CPU time the process has used so far (user and system):
// the server's, the session's and the publisher's alike.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the CPU time per event since t0 of n events: steadier
// than the rate on a shared machine.
func reportCPU(b *testing.B, t0 time.Duration, n int) {
	b.ReportMetric(float64(cpuTime(b)-t0)/1e3/float64(n), "cpu-µs/event")
}

func ctx(b *testing.B) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	b.Cleanup(cancel)
	return c
}

func BenchmarkChain(b *testing.B) {
	e := env(b)
	for _, n := range []int{10, 100, 1000} {
		for _, durable := range []bool{false, true} {
			b.Run(fmt.Sprintf("N=%d/durable=%v", n, durable), func(b *testing.B) {
				t0 := cpuTime(b)
				d, err := benchmark.Chain(ctx(b), e, n, b.N, durable)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(d)/1e3, "µs/node")
				// The CPU of every Run, background work included (the
				// removal of the one before, the next one's store).
				b.ReportMetric(float64(cpuTime(b)-t0)/1e3/float64(b.N*n), "cpu-µs/node")
			})
		}
	}
}

// BenchmarkChainNamed is BenchmarkChain's 10-node durable pipeline, each
// Run under a session id of its own choosing (bench's named-sessions row).
func BenchmarkChainNamed(b *testing.B) {
	e := env(b)
	t0 := cpuTime(b)
	d, err := benchmark.ChainNamed(ctx(b), e, 10, b.N)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(d)/1e3, "µs/node")
	b.ReportMetric(float64(cpuTime(b)-t0)/1e3/float64(b.N*10), "cpu-µs/node")
}

func BenchmarkRawNATSChain(b *testing.B) {
	e := env(b)
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			d, err := benchmark.RawNATSChain(ctx(b), e, n, b.N)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(d)/1e3, "µs/node")
		})
	}
}

func BenchmarkActorChain(b *testing.B) {
	d, err := benchmark.ActorChain(ctx(b), 100, b.N)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(d)/1e3, "µs/node")
}

func BenchmarkIngest(b *testing.B) {
	e := env(b)
	for _, durable := range []bool{false, true} {
		for _, d := range []benchmark.Delivery{benchmark.Queue, benchmark.Latest, benchmark.Join3} {
			b.Run(fmt.Sprintf("%s/durable=%v", d, durable), func(b *testing.B) {
				t0 := cpuTime(b)
				rate, err := benchmark.Ingest(ctx(b), e, d, 3*b.N, durable)
				if err != nil {
					b.Fatal(err)
				}
				reportCPU(b, t0, 3*b.N)
				b.ReportMetric(rate, "events/s")
			})
		}
	}
	b.Run("queue/durable=true/large", func(b *testing.B) {
		t0 := cpuTime(b)
		rate, err := benchmark.IngestLarge(ctx(b), e, benchmark.Queue, 3*b.N)
		if err != nil {
			b.Fatal(err)
		}
		reportCPU(b, t0, 3*b.N)
		b.ReportMetric(rate, "events/s")
	})
}

func BenchmarkRawNATSIngest(b *testing.B) {
	e := env(b)
	t0 := cpuTime(b)
	rate, err := benchmark.RawNATSIngest(ctx(b), e, b.N)
	if err != nil {
		b.Fatal(err)
	}
	reportCPU(b, t0, b.N)
	b.ReportMetric(rate, "events/s")
}

func BenchmarkJetStreamIngest(b *testing.B) {
	e := env(b)
	t0 := cpuTime(b)
	rate, err := benchmark.JetStreamIngest(ctx(b), e, b.N)
	if err != nil {
		b.Fatal(err)
	}
	reportCPU(b, t0, b.N)
	b.ReportMetric(rate, "events/s")
}

func BenchmarkFanOut(b *testing.B) {
	d, err := benchmark.FanOut(ctx(b), env(b), 100, b.N, false)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(d)/1e3, "µs/branch")
}

// BenchmarkIdleSession starts a session of 10,000 idle nodes per op.
func BenchmarkIdleSession(b *testing.B) {
	e := env(b)
	for b.Loop() {
		f, err := benchmark.IdleSession(ctx(b), e, 10000, false)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(f.HeapPerNode, "B/node")
		b.ReportMetric(f.GoroutinesPerNode, "goroutines/node")
	}
}
