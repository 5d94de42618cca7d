// Package benchmark measures the runtime end to end against the floors it
// is built on, in the same process and the same run: raw NATS subscribers
// that decode and re-encode the Envelope, JetStream consume+ack, protoactor
// send/receive and an in-process Go chain. `switchyard bench` prints its
// table; the Go benchmarks of this package call the same functions.
//
// Every figure is a Row: the runtime's value, the baselines measured next
// to it, the ratio to the first baseline and, where the performance issue
// sets one, the target and whether it was met. Speed is never asserted by a
// test: a Row that could not be measured carries the error instead.
package benchmark

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/metrics"
	"slices"
	"time"

	"github.com/switchyard/switchyard/broker"
)

// Config says what to measure.
type Config struct {
	// Chains are the pipeline lengths (nodes between start and exit).
	Chains []int
	// Events is how many outside events each ingest case publishes.
	Events int
	// FanOut is the number of parallel branches of the fan-out case.
	FanOut int
	// Idle are the node counts of the idle-session cases; the largest also
	// gives the session start time.
	Idle []int
	// CLIRuns is how many times `switchyard run` is timed (0 skips it).
	CLIRuns int
	// KeptRuns is how many completed sessions the store holds when `run`
	// is timed once more (a week of use kept by --retain; 0 skips it).
	KeptRuns int
	// Binary is the switchyard executable for the CLI case.
	Binary string
	// Cases keeps only these groups (chain, ingest, fanout, idle, cli);
	// empty runs them all.
	Cases []string
	// MinNodes is how many node firings a chain size is repeated to at
	// least (small chains run several times, the median is kept).
	MinNodes int
	// Rounds is how many times each case with a ratio is measured, in
	// alternation with its first baseline (baseline, case, baseline, …,
	// case, baseline); the row keeps the median of each. The machine may be
	// shared: a baseline measured once, at one moment, skewed every ratio
	// that moment was slow or fast for. 0 means 3.
	Rounds int
	// Timeout bounds one measurement.
	Timeout time.Duration
	// Progress receives a line per measurement (nil: none).
	Progress io.Writer
}

// Quick is a configuration that runs everything in seconds, on tiny sizes.
func Quick() Config {
	return Config{Chains: []int{10, 100}, Events: 2000, FanOut: 10, Idle: []int{200}, CLIRuns: 2, MinNodes: 200, Rounds: 2,
		Timeout: time.Minute}
}

// Full is the configuration of the performance issue's table.
func Full() Config {
	return Config{Chains: []int{10, 100, 1000, 10000}, Events: 100000, FanOut: 100, Idle: []int{10000, 100000}, CLIRuns: 5,
		KeptRuns: 100, MinNodes: 2000, Timeout: 5 * time.Minute}
}

// Baseline is a floor measured in the same run.
type Baseline struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
}

// Row is one figure of the table.
type Row struct {
	Group string `json:"group"`
	Case  string `json:"case"`
	Unit  string `json:"unit"`
	// Value is the runtime's figure (0 with Error).
	Value     float64    `json:"value"`
	Baselines []Baseline `json:"baselines,omitempty"`
	// Ratio is Value over the first baseline's value (a cost: how many
	// times slower; a rate: the fraction of the baseline's rate).
	Ratio float64 `json:"ratio,omitempty"`
	// RatioMin and RatioMax are the lowest and highest ratio of a single
	// round (Config.Rounds): the round's median over the mean of the
	// baseline's rounds measured right before and right after it. They
	// say how far the machine moved the ratio during the run: a target
	// that a round's ratio falls on both sides of is met or not by the
	// moment, not by the code. Zero when fewer than two rounds ran.
	RatioMin float64 `json:"ratio_min,omitempty"`
	RatioMax float64 `json:"ratio_max,omitempty"`
	// Target is the target in words, Met whether it holds.
	Target string `json:"target,omitempty"`
	Met    *bool  `json:"met,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Rate reports whether the row is a rate (higher is better).
func (r Row) Rate() bool { return r.Unit == "events/s" }

func (r *Row) base(name string, v float64) {
	r.Baselines = append(r.Baselines, Baseline{Name: name, Value: v})
	if len(r.Baselines) == 1 && v > 0 && r.Error == "" {
		r.Ratio = r.Value / v
	}
}

// spread sets RatioMin and RatioMax from the rounds of c, measured in
// turns with base (alternate: base, c, base, …, c, base).
func (r *Row) spread(c, base *series) {
	if r.Error != "" || len(c.rounds) < 2 || len(base.rounds) < len(c.rounds)+1 {
		return
	}
	for i, v := range c.rounds {
		b := (base.rounds[i] + base.rounds[i+1]) / 2
		if b <= 0 {
			return
		}
		x := v / b
		if i == 0 || x < r.RatioMin {
			r.RatioMin = x
		}
		if i == 0 || x > r.RatioMax {
			r.RatioMax = x
		}
	}
}

func (r *Row) ratioTarget(desc string, ok func(ratio float64) bool) {
	r.Target = desc
	if r.Error != "" || len(r.Baselines) == 0 {
		f := false
		r.Met = &f
		return
	}
	m := ok(r.Ratio)
	r.Met = &m
}

func (r *Row) valueTarget(desc string, ok func(v float64) bool) {
	r.Target = desc
	m := r.Error == "" && ok(r.Value)
	r.Met = &m
}

// Env is what the measurements share: one embedded NATS server with
// JetStream on a temporary directory (file storage, as the CLI's default).
type Env struct {
	Broker *broker.Broker
	dir    string
	own    bool
}

// NewEnv starts the embedded server in a temporary directory.
func NewEnv(ctx context.Context) (*Env, error) {
	dir, err := os.MkdirTemp("", "switchyard-bench-")
	if err != nil {
		return nil, err
	}
	b, err := broker.Start(ctx, broker.Config{DataDir: dir, ServerName: "bench", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return &Env{Broker: b, dir: dir, own: true}, nil
}

// Close stops the server and removes its directory.
func (e *Env) Close() {
	if e.own {
		_ = e.Broker.Close()
		_ = os.RemoveAll(e.dir)
	}
}

// Run measures what cfg asks for and returns the rows in table order.
func Run(ctx context.Context, cfg Config) ([]Row, error) {
	env, err := NewEnv(ctx)
	if err != nil {
		return nil, err
	}
	defer env.Close()
	want := func(g string) bool { return len(cfg.Cases) == 0 || slices.Contains(cfg.Cases, g) }
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Minute
	}
	if cfg.MinNodes <= 0 {
		cfg.MinNodes = 1
	}
	if cfg.Rounds <= 0 {
		cfg.Rounds = 3
	}
	var rows []Row
	add := func(r Row) {
		rows = append(rows, r)
		if cfg.Progress != nil {
			if r.Error != "" {
				fmt.Fprintf(cfg.Progress, "%-44s error: %s\n", r.Case, r.Error)
			} else {
				fmt.Fprintf(cfg.Progress, "%-44s %s\n", r.Case, fmtVal(r.Value, r.Unit))
			}
		}
	}
	if want("chain") {
		chainRows(ctx, env, cfg, add)
	}
	if want("ingest") {
		ingestRows(ctx, env, cfg, add)
	}
	if want("fanout") && cfg.FanOut > 0 {
		add(fanoutRow(ctx, env, cfg))
	}
	if want("idle") {
		idleRows(ctx, env, cfg, add)
	}
	if want("cli") && cfg.CLIRuns > 0 {
		for _, r := range cliRows(ctx, cfg) {
			add(r)
		}
	}
	return rows, nil
}

// median of ds (ds is sorted in place): of an even number, the mean of
// the two in the middle. (It took the upper one: the baseline of a row
// measured in rounds — four rounds around the case's three — had its
// third-lowest round as its median, which set every rate's ratio low and
// every cost's a little low too; TestRatioOfAMachineThatSpeedsUp.)
func median(ds []float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	n := len(ds)
	if n%2 == 0 {
		return (ds[n/2-1] + ds[n/2]) / 2
	}
	return ds[n/2]
}

// series is one figure measured in rounds: every sample of every round,
// and the first error (after which it is not measured again).
type series struct {
	measure func() ([]float64, error)
	samples []float64
	rounds  []float64 // each round's median
	err     error
}

func (s *series) run() {
	if s.err != nil {
		return
	}
	v, err := s.measure()
	if err != nil {
		s.err = err
		return
	}
	s.samples = append(s.samples, v...)
	s.rounds = append(s.rounds, median(slices.Clone(v)))
}

// median of the samples so far (0 with none).
func (s *series) median() float64 { return median(slices.Clone(s.samples)) }

// alternate measures cases and their baseline in turns — baseline, the
// cases, baseline, the cases, …, baseline — rounds times, so a slow moment
// of a shared machine weighs on the baseline as on the cases.
func alternate(rounds int, base *series, cases ...*series) {
	for r := 0; r < rounds; r++ {
		base.run()
		for _, c := range cases {
			c.run()
		}
	}
	base.run()
}

// reps is how many times a chain of n nodes runs to reach min firings.
func reps(n, min int) int {
	r := (min + n - 1) / n
	if r < 1 {
		r = 1
	}
	if r > 200 {
		r = 200
	}
	return r
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// withTimeout bounds one measurement in time and in memory: the machine
// may be shared, so a measurement whose heap passes a third of the memory
// that was available when it started is stopped (its row says so).
func withTimeout(ctx context.Context, cfg Config) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeoutCause(ctx, cfg.Timeout, fmt.Errorf("took longer than %v (--timeout)", cfg.Timeout))
	limit := availableMemory() / 3
	if limit <= 0 {
		return ctx, cancel
	}
	c, stop := context.WithCancelCause(ctx)
	go func() {
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-c.Done():
				return
			case <-t.C:
				metrics.Read(sample)
				if h := int64(sample[0].Value.Uint64()); h > limit {
					stop(fmt.Errorf("stopped: the heap passed %d MB, a third of the memory available", limit/1e6))
					return
				}
			}
		}
	}()
	return c, func() { stop(nil); cancel() }
}

// why is the cause of ctx's end, else err.
func why(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if c := context.Cause(ctx); c != nil && ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", c, err)
	}
	return err
}
