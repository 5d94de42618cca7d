package benchmark

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/switchyard/switchyard/broker"
)

const (
	unitUs     = "µs/node"
	unitRate   = "events/s"
	unitBytes  = "B/node"
	unitGor    = "goroutines/node"
	unitMs     = "ms"
	unitBranch = "µs/branch"
)

// timed is a measurement of f bounded as withTimeout bounds one.
func timed(ctx context.Context, cfg Config, f func(context.Context) ([]float64, error)) func() ([]float64, error) {
	return func() ([]float64, error) {
		c, cancel := withTimeout(ctx, cfg)
		defer cancel()
		v, err := f(c)
		return v, why(c, err)
	}
}

func chainRows(ctx context.Context, env *Env, cfg Config, add func(Row)) {
	perNode := map[bool]map[int]float64{false: {}, true: {}}
	rawHop := map[int]float64{} // the raw NATS hop measured in the same rounds, by N
	for _, n := range cfg.Chains {
		passes := reps(n, cfg.MinNodes)
		// The raw NATS line and the two chains in turns (alternate); a
		// round runs each chain passes/rounds times.
		rounds := min(cfg.Rounds, passes)
		per := (passes + rounds - 1) / rounds
		raw := &series{measure: timed(ctx, cfg, func(c context.Context) ([]float64, error) { return rawNATSChain(c, env, n, max(per, 10)) })}
		chains := map[bool]*series{}
		for _, durable := range []bool{false, true} {
			chains[durable] = &series{measure: timed(ctx, cfg, func(c context.Context) ([]float64, error) { return chain(c, env, n, per, durable) })}
		}
		cases := []*series{chains[false], chains[true]}
		// The shortest durable chain also with named sessions, which take
		// no store prepared ahead: what a process's first Run costs.
		var named *series
		if n == cfg.Chains[0] {
			named = &series{measure: timed(ctx, cfg, func(c context.Context) ([]float64, error) { return chainNamed(c, env, n, per) })}
			cases = append(cases, named)
		}
		alternate(rounds, raw, cases...)
		if raw.err == nil {
			rawHop[n] = raw.median() / 1e3
		}
		act, actErr := func() (time.Duration, error) {
			c, cancel := withTimeout(ctx, cfg)
			defer cancel()
			return ActorChain(c, n, max(passes, 10))
		}()
		gochain := GoChain(n, max(passes, 100))
		for _, durable := range []bool{false, true} {
			name := fmt.Sprintf("pipeline N=%d, no checkpoints", n)
			if durable {
				name = fmt.Sprintf("pipeline N=%d, checkpoints (durable)", n)
			}
			s := chains[durable]
			r := Row{Group: "chain", Case: name, Unit: unitUs, Value: s.median() / 1e3}
			if s.err != nil {
				r.Error, r.Value = s.err.Error(), 0
			} else {
				perNode[durable][n] = r.Value
			}
			if raw.err != nil {
				r.Error = strings.TrimSpace(r.Error + " baseline: " + raw.err.Error())
			}
			r.base("raw NATS hop", raw.median()/1e3)
			r.spread(s, raw)
			if actErr == nil {
				r.base("protoactor hop", us(act))
			}
			r.base("Go chain", us(gochain))
			if durable {
				r.ratioTarget("≤ 10× raw NATS", func(x float64) bool { return x <= 10 })
			} else {
				r.ratioTarget("≤ 3× raw NATS", func(x float64) bool { return x <= 3 })
			}
			add(r)
		}
		if named != nil {
			r := Row{Group: "chain", Case: fmt.Sprintf("pipeline N=%d, checkpoints, named sessions (no prepared store)", n), Unit: unitUs, Value: named.median() / 1e3}
			if named.err != nil {
				r.Error, r.Value = named.err.Error(), 0
			}
			r.base("raw NATS hop", raw.median()/1e3)
			r.spread(named, raw)
			r.ratioTarget("≤ 10× raw NATS", func(x float64) bool { return x <= 10 })
			add(r)
		}
	}
	growthRows(ctx, env, cfg, perNode, rawHop, add)
}

// growthRows adds the linearity rows: the per-node cost of the longest
// chain over that of the shortest of at least 100 nodes. The rows above
// measure the sizes minutes apart, and a shared machine's speed drifts by
// more than the target allows over minutes (the same code measured 1.06×
// and 1.49× in two runs a minute apart): here the two chains run in
// turns — the short one, the long one, …, the short one — and the
// growth is the long one's median over the short one's. The raw NATS
// hop's own growth between the sizes (from the rows above) is the
// baseline: how much the bus itself grows.
func growthRows(ctx context.Context, env *Env, cfg Config, perNode map[bool]map[int]float64, rawHop map[int]float64, add func(Row)) {
	lo, hi := 0, 0
	for _, n := range cfg.Chains {
		if n >= 100 && (lo == 0 || n < lo) {
			lo = n
		}
		if n > hi {
			hi = n
		}
	}
	if lo == 0 || hi <= lo {
		return
	}
	rounds := max(cfg.Rounds, 1)
	perLo := (reps(lo, cfg.MinNodes) + rounds - 1) / rounds
	perHi := (reps(hi, cfg.MinNodes) + rounds - 1) / rounds
	for _, durable := range []bool{false, true} {
		what := "no checkpoints"
		if durable {
			what = "checkpoints"
		}
		r := Row{Group: "chain", Case: fmt.Sprintf("per-node growth N=%d vs N=%d, %s", hi, lo, what), Unit: "×"}
		measure := func(n, passes int) *series {
			return &series{measure: timed(ctx, cfg, func(c context.Context) ([]float64, error) { return chain(c, env, n, passes, durable) })}
		}
		short, long := measure(lo, perLo), measure(hi, perHi)
		if perNode[durable][hi] == 0 || perNode[durable][lo] == 0 {
			r.Error = "a chain did not run"
		} else {
			alternate(rounds, short, long)
			switch {
			case short.err != nil:
				r.Error = short.err.Error()
			case long.err != nil:
				r.Error = long.err.Error()
			default:
				r.Value = long.median() / short.median()
			}
		}
		bus := 0.0
		if rawHop[hi] > 0 && rawHop[lo] > 0 {
			bus = rawHop[hi] / rawHop[lo]
			r.base("raw NATS hop growth", bus)
		}
		// Each round's growth over the bus's: the long chain's round over
		// the mean of the short one's right before and after it.
		if r.spread(long, short); bus > 0 {
			r.RatioMin, r.RatioMax = r.RatioMin/bus, r.RatioMax/bus
		} else {
			r.RatioMin, r.RatioMax = 0, 0
		}
		r.valueTarget("≤ 1.5×", func(v float64) bool { return v <= 1.5 })
		add(r)
	}
}

func ingestRows(ctx context.Context, env *Env, cfg Config, add func(Row)) {
	rate := func(f func(context.Context) (float64, error)) *series {
		return &series{measure: func() ([]float64, error) {
			c, cancel := withTimeout(ctx, cfg)
			defer cancel()
			v, err := f(c)
			if err = why(c, err); err != nil {
				return nil, err
			}
			return []float64{v}, nil
		}}
	}
	// Each case alternates with its first baseline (alternate): the raw
	// subscriber for the cases that are not durable, JetStream's
	// consume+ack for the durable ones. The raw subscriber's figure on a
	// durable row is the median of all its rounds.
	raw := rate(func(c context.Context) (float64, error) { return RawNATSIngest(c, env, cfg.Events) })
	js := rate(func(c context.Context) (float64, error) { return JetStreamIngest(c, env, cfg.Events) })
	for _, durable := range []bool{false, true} {
		base := raw
		if durable {
			base = js
		}
		cases := map[Delivery]*series{}
		var all []*series
		for _, d := range []Delivery{Queue, Latest, Join3} {
			cases[d] = rate(func(c context.Context) (float64, error) { return Ingest(c, env, d, cfg.Events, durable) })
			all = append(all, cases[d])
		}
		// A queue edge of a large graph: through the session's intake.
		const large = Delivery("large")
		shown := []Delivery{Queue, Latest, Join3}
		if durable {
			cases[large] = rate(func(c context.Context) (float64, error) { return IngestLarge(c, env, Queue, cfg.Events) })
			all = append(all, cases[large])
			shown = append(shown, large)
		}
		alternate(cfg.Rounds, base, all...)
		for _, d := range shown {
			s := cases[d]
			what := "not durable"
			if durable {
				what = "durable"
			}
			if d == large {
				d, what = Queue, fmt.Sprintf("durable, %d idle nodes more (through the session's intake)", broker.MaxListedSubjects)
			}
			r := Row{Group: "ingest", Case: fmt.Sprintf("ingest %d events, %s edge, %s", cfg.Events, d, what), Unit: unitRate, Value: s.median()}
			if s.err != nil {
				r.Error, r.Value = s.err.Error(), 0
			}
			if base.err != nil {
				r.Error = strings.TrimSpace(r.Error + " baseline: " + base.err.Error())
			}
			r.spread(s, base)
			if durable {
				r.base("JetStream consume+ack", js.median())
				r.base("raw NATS subscriber", raw.median())
				r.ratioTarget("≥ 50% of JetStream", func(x float64) bool { return x >= 0.5 })
			} else {
				r.base("raw NATS subscriber", raw.median())
				r.ratioTarget("≥ 30% of raw NATS", func(x float64) bool { return x >= 0.3 })
			}
			add(r)
		}
	}
}

func fanoutRow(ctx context.Context, env *Env, cfg Config) Row {
	passes := reps(cfg.FanOut, cfg.MinNodes)
	rounds := min(cfg.Rounds, passes)
	per := (passes + rounds - 1) / rounds
	c, cancel := withTimeout(ctx, cfg)
	defer cancel()
	raw := &series{measure: func() ([]float64, error) { return rawNATSFanOut(c, env, cfg.FanOut, max(per, 10)) }}
	fan := &series{measure: func() ([]float64, error) { v, err := fanOut(c, env, cfg.FanOut, per, false); return v, why(c, err) }}
	alternate(rounds, raw, fan)
	r := Row{Group: "fanout", Case: fmt.Sprintf("fan-out 1→%d→fan-in, no checkpoints", cfg.FanOut), Unit: unitBranch, Value: fan.median() / 1e3}
	if fan.err != nil {
		r.Error, r.Value = fan.err.Error(), 0
	}
	if raw.err != nil {
		r.Error = strings.TrimSpace(r.Error + " baseline: " + raw.err.Error())
	}
	r.base("raw NATS fan-out", raw.median()/1e3)
	r.spread(fan, raw)
	return r
}

func idleRows(ctx context.Context, env *Env, cfg Config, add func(Row)) {
	largest := 0
	var largestStart time.Duration
	var largestActor time.Duration
	var startErr error
	sizes := slices.Sorted(slices.Values(cfg.Idle))
	var measured Footprint // of the largest size run so far
	measuredAt := 0
	for _, n := range sizes {
		base := ActorIdle(n)
		var f Footprint
		var err error
		if need := measured.MemPerNode * float64(n); measuredAt > 0 && float64(availableMemory()) < 3*need {
			// The machine is shared: a session that would take more than a
			// third of the memory available is not started.
			err = fmt.Errorf("not run: would need about %.0f MB (%.0f KB per node measured at %d nodes), more than a third of the %d MB available",
				need/1e6, measured.MemPerNode/1e3, measuredAt, availableMemory()/1e6)
		} else {
			c, cancel := withTimeout(ctx, cfg)
			f, err = IdleSession(c, env, n, false)
			err = why(c, err)
			cancel()
			if err == nil {
				measured, measuredAt = f, n
			}
		}
		heap := Row{Group: "idle", Case: fmt.Sprintf("idle node heap, %d nodes", n), Unit: unitBytes, Value: f.HeapPerNode}
		gor := Row{Group: "idle", Case: fmt.Sprintf("idle node goroutines, %d nodes", n), Unit: unitGor, Value: f.GoroutinesPerNode}
		if err != nil {
			heap.Error, gor.Error, heap.Value, gor.Value = err.Error(), err.Error(), 0, 0
		}
		heap.base("protoactor idle actor", base.HeapPerNode)
		gor.base("protoactor idle actor", base.GoroutinesPerNode)
		heap.valueTarget("≤ 2048 B", func(v float64) bool { return v <= 2048 })
		gor.valueTarget("none of its own (< 0.01)", func(v float64) bool { return v < 0.01 })
		add(heap)
		add(gor)
		if n >= largest {
			largest, largestStart, largestActor, startErr = n, f.Start, base.Start, err
		}
	}
	if largest > 0 {
		r := Row{Group: "idle", Case: fmt.Sprintf("session start, %d nodes", largest), Unit: unitMs, Value: ms(largestStart)}
		if startErr != nil {
			r.Error, r.Value = startErr.Error(), 0
		}
		r.base("protoactor spawn", ms(largestActor))
		if largest >= 100000 {
			r.valueTarget("< 2000 ms", func(v float64) bool { return v < 2000 })
		}
		add(r)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// helloDOT is examples/hello.dot.
const helloDOT = `digraph hello {
    graph [goal="Say hello to the world", label="Hello"]
    start [shape=Mdiamond]
    greet [shape=box, prompt="Write a one-line greeting for: $goal"]
    exit  [shape=Msquare]
    start -> greet -> exit
}
`

// CLIRun times `switchyard run hello.dot` as a user runs it, on the store
// in data (the embedded server), and returns the wall time.
func CLIRun(ctx context.Context, bin, dir, data string, extra ...string) (time.Duration, error) {
	dot := filepath.Join(dir, "hello.dot")
	if err := os.WriteFile(dot, []byte(helloDOT), 0o644); err != nil {
		return 0, err
	}
	logs, err := os.MkdirTemp(dir, "logs-")
	if err != nil {
		return 0, err
	}
	args := append([]string{"run", dot, "--data", data, "--logs", logs}, extra...)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(t0)
	if err != nil {
		return 0, fmt.Errorf("%s run: %v: %s", bin, err, lastLine(out))
	}
	return d, nil
}

// ProcessStart times `switchyard help`: starting the binary at all.
func ProcessStart(ctx context.Context, bin string) (time.Duration, error) {
	t0 := time.Now()
	if out, err := exec.CommandContext(ctx, bin, "help").CombinedOutput(); err != nil {
		return 0, fmt.Errorf("%s help: %v: %s", bin, err, lastLine(out))
	}
	return time.Since(t0), nil
}

func lastLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

func cliRows(ctx context.Context, cfg Config) []Row {
	c, cancel := withTimeout(ctx, cfg)
	defer cancel()
	dir, err := os.MkdirTemp("", "switchyard-bench-cli-")
	if err != nil {
		return []Row{{Group: "cli", Case: "run hello.dot", Error: err.Error()}}
	}
	defer os.RemoveAll(dir)
	var starts []float64
	for i := 0; i < 3; i++ {
		d, err := ProcessStart(c, cfg.Binary)
		if err != nil {
			return []Row{{Group: "cli", Case: "run hello.dot", Error: err.Error()}}
		}
		starts = append(starts, ms(d))
	}
	startMs := median(starts)
	target := func(r *Row) { r.valueTarget("≤ 100 ms", func(v float64) bool { return v <= 100 }) }
	data := filepath.Join(dir, "data")
	var first, last float64
	var runErr error
	for i := 0; i < cfg.CLIRuns; i++ {
		d, err := CLIRun(c, cfg.Binary, dir, data)
		if err != nil {
			runErr = err
			break
		}
		if i == 0 {
			first = ms(d)
		}
		last = ms(d)
	}
	fresh := Row{Group: "cli", Case: "run hello.dot, fresh store", Unit: unitMs, Value: first}
	kept := Row{Group: "cli", Case: fmt.Sprintf("run hello.dot, store of %d earlier runs", cfg.CLIRuns-1), Unit: unitMs, Value: last}
	eph := Row{Group: "cli", Case: "run hello.dot --durable=false", Unit: unitMs}
	if runErr != nil {
		fresh.Error, kept.Error, fresh.Value, kept.Value = runErr.Error(), runErr.Error(), 0, 0
	}
	var ephs []float64
	for i := 0; i < max(1, cfg.CLIRuns/2); i++ {
		d, err := CLIRun(c, cfg.Binary, dir, filepath.Join(dir, fmt.Sprintf("eph%d", i)), "--durable=false")
		if err != nil {
			eph.Error = err.Error()
			break
		}
		ephs = append(ephs, ms(d))
	}
	if eph.Error == "" {
		eph.Value = median(ephs)
	}
	rows := []Row{fresh, kept, eph}
	if cfg.KeptRuns > cfg.CLIRuns && runErr == nil {
		rows = append(rows, keptRow(c, cfg, dir, data))
	}
	for i := range rows {
		rows[i].base("process start (switchyard help)", startMs)
		target(&rows[i])
	}
	return rows
}

// keptRow times `run` on a store holding cfg.KeptRuns completed sessions
// (cliRows made the first cfg.CLIRuns): the median of three runs, each
// adding one more. nats-server recovers every stream of its store when it
// starts, and a completed session keeps its bucket and object store.
func keptRow(ctx context.Context, cfg Config, dir, data string) Row {
	r := Row{Group: "cli", Case: fmt.Sprintf("run hello.dot, store of %d earlier runs", cfg.KeptRuns), Unit: unitMs}
	for i := cfg.CLIRuns; i < cfg.KeptRuns; i++ {
		if _, err := CLIRun(ctx, cfg.Binary, dir, data); err != nil {
			r.Error = err.Error()
			return r
		}
	}
	var ds []float64
	for range 3 {
		d, err := CLIRun(ctx, cfg.Binary, dir, data)
		if err != nil {
			r.Error = err.Error()
			return r
		}
		ds = append(ds, ms(d))
	}
	r.Value = median(ds)
	return r
}

// fmtVal formats a value with its unit.
func fmtVal(v float64, unit string) string {
	switch unit {
	case unitRate:
		return fmt.Sprintf("%.0f %s", v, unit)
	case unitBytes:
		return fmt.Sprintf("%.0f %s", v, unit)
	case unitGor, "×":
		return fmt.Sprintf("%.2f %s", v, unit)
	default:
		if v >= 100 {
			return fmt.Sprintf("%.0f %s", v, unit)
		}
		return fmt.Sprintf("%.1f %s", v, unit)
	}
}

func fmtNum(v float64, unit string) string {
	s := fmtVal(v, unit)
	return strings.TrimSuffix(s, " "+unit)
}

// WriteTable prints rows as an aligned table.
func WriteTable(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "case\tswitchyard\tbaselines\tratio\ttarget\tmet")
	for _, r := range rows {
		var bs []string
		for _, b := range r.Baselines {
			bs = append(bs, b.Name+" "+fmtNum(b.Value, r.Unit))
		}
		val := fmtVal(r.Value, r.Unit)
		if r.Error != "" {
			val = "error: " + r.Error
			if len(val) > 70 {
				val = val[:70] + "…"
			}
		}
		ratio := ""
		if r.Ratio > 0 {
			if r.Rate() {
				ratio = fmt.Sprintf("%.1f%%", 100*r.Ratio)
			} else {
				ratio = fmt.Sprintf("%.2f×", r.Ratio)
			}
			if r.RatioMax > 0 {
				if r.Rate() {
					ratio += fmt.Sprintf(" (rounds %.1f–%.1f%%)", 100*r.RatioMin, 100*r.RatioMax)
				} else {
					ratio += fmt.Sprintf(" (rounds %.2f–%.2f×)", r.RatioMin, r.RatioMax)
				}
			}
		}
		met := ""
		if r.Met != nil {
			met = "no"
			if *r.Met {
				met = "yes"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Case, val, strings.Join(bs, ", "), ratio, r.Target, met)
	}
	return tw.Flush()
}

// ErrorsOf counts the rows that could not be measured.
func ErrorsOf(rows []Row) int {
	n := 0
	for _, r := range rows {
		if r.Error != "" {
			n++
		}
	}
	return n
}
