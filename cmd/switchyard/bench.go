package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/internal/benchmark"
)

func init() { subcommands = append(subcommands, newBenchCmd) }

func newBenchCmd() *cobra.Command {
	var quick, asJSON bool
	var chains, idle, cases, binary string
	var events, fanout, cliRuns, keptRuns int
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure the runtime against raw NATS, JetStream, protoactor and plain Go, in one run",
		Long: `Bench measures the runtime end to end on an embedded server of its own (a temporary
JetStream directory) and, in the same run, the floors it is built on: raw NATS subscribers
decoding and re-encoding the Envelope, JetStream consume+ack, protoactor send/receive, an
in-process Go chain. Each row prints the runtime's figure, the baselines, the ratio to the
first baseline, the target of the performance work and whether it is met.

Groups (--cases): chain (pipelines of Go agents, with and without checkpoints), ingest
(outside events into a queue edge, a latest edge and a 3-way join, durable and not), fanout
(1→N→fan-in), idle (heap and goroutines per idle node, session start), cli (wall time of
switchyard run examples/hello.dot). The full run takes minutes; --quick takes seconds on
tiny sizes. docs/performance.md explains every figure.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := benchmark.Full()
			if quick {
				cfg = benchmark.Quick()
			}
			fl := cmd.Flags()
			var err error
			if fl.Changed("chains") {
				if cfg.Chains, err = intList(chains); err != nil {
					return usageErr(fmt.Errorf("--chains: %w", err))
				}
			}
			if fl.Changed("idle") {
				if cfg.Idle, err = intList(idle); err != nil {
					return usageErr(fmt.Errorf("--idle: %w", err))
				}
			}
			if fl.Changed("events") {
				cfg.Events = events
			}
			if fl.Changed("fanout") {
				cfg.FanOut = fanout
			}
			if fl.Changed("cli-runs") {
				cfg.CLIRuns = cliRuns
			}
			if fl.Changed("kept-runs") {
				cfg.KeptRuns = keptRuns
			}
			if fl.Changed("timeout") {
				cfg.Timeout = timeout
			}
			if cases != "" {
				for _, c := range strings.Split(cases, ",") {
					switch c = strings.TrimSpace(c); c {
					case "chain", "ingest", "fanout", "idle", "cli":
						cfg.Cases = append(cfg.Cases, c)
					default:
						return usageErr(fmt.Errorf("--cases: unknown case %q (chain, ingest, fanout, idle, cli)", c))
					}
				}
			}
			if cfg.Events < 0 || cfg.FanOut < 0 || cfg.CLIRuns < 0 || cfg.KeptRuns < 0 {
				return usageErr(fmt.Errorf("sizes must not be negative"))
			}
			if cfg.Binary = binary; cfg.Binary == "" {
				if cfg.Binary, err = os.Executable(); err != nil {
					return err
				}
			}
			if !asJSON {
				cfg.Progress = cmd.ErrOrStderr()
			}
			rows, err := benchmark.Run(cmd.Context(), cfg)
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(map[string]any{"rows": rows}); err != nil {
					return err
				}
			} else {
				fmt.Fprintln(out)
				if err := benchmark.WriteTable(out, rows); err != nil {
					return err
				}
			}
			if n := benchmark.ErrorsOf(rows); n > 0 {
				return &exitError{code: 1, err: fmt.Errorf("%d of %d figures could not be measured", n, len(rows))}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&quick, "quick", false, "tiny sizes: seconds, not minutes (the figures are noisier)")
	fl.BoolVar(&asJSON, "json", false, "print the rows as JSON")
	fl.StringVar(&chains, "chains", "", "pipeline lengths, comma-separated (default 10,100,1000,10000)")
	fl.StringVar(&idle, "idle", "", "idle session sizes, comma-separated (default 10000,100000)")
	fl.IntVar(&events, "events", 0, "outside events per ingest case (default 100000)")
	fl.IntVar(&fanout, "fanout", 0, "branches of the fan-out case (default 100)")
	fl.IntVar(&cliRuns, "cli-runs", 0, "how many times switchyard run is timed (default 5)")
	fl.IntVar(&keptRuns, "kept-runs", 0, "time switchyard run once more on a store of this many completed runs (default 100; 0 skips it)")
	fl.StringVar(&cases, "cases", "", "only these groups: chain, ingest, fanout, idle, cli (comma-separated)")
	fl.StringVar(&binary, "binary", "", "the switchyard executable the cli case runs (default: this one)")
	fl.DurationVar(&timeout, "timeout", 0, "bound on one measurement (default 5m)")
	return cmd
}

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}
