package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/session"
)

func init() { subcommands = append(subcommands, newResumeCmd, newHistoryCmd, newGCCmd) }

func newResumeCmd() *cobra.Command {
	f := &runFlags{durable: true}
	cmd := &cobra.Command{
		Use:   "resume SESSION",
		Short: "Continue a durable session from its last checkpoint, or fork it from an earlier one",
		Long: `Resume continues a durable session (every run and serve is durable unless
--durable=false) from its last checkpoint: nodes that completed are not run again, a node
that was interrupted runs again with the same attempt id, envelopes that were not consumed
are delivered, and iteration counts and budgets go on from where they were. The graph is
read from the session's store, so only the id is needed (with the same --data or --nats).
A pipeline runs to its end (exit status as for run); a reactive session is served until
stopped (as by serve).

With --from N --as NEW, a new session NEW starts from checkpoint N of SESSION (see
switchyard history) and the original is left as it is.`,
		Args: sessionArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f.resumeID = args[0]
			if (f.from != 0) != (f.forkAs != "") {
				return usageErr(fmt.Errorf("--from and --as go together (fork SESSION at checkpoint N as NEW)"))
			}
			if err := checkSessionID("--as", f.forkAs); err != nil {
				return err
			}
			return runPipeline(cmd.Context(), f, "", cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f.addSessionFlags(cmd)
	fl := cmd.Flags()
	fl.Uint64Var(&f.from, "from", 0, "fork from this checkpoint (a number from switchyard history)")
	fl.StringVar(&f.forkAs, "as", "", "the fork's session id")
	return cmd
}

// storedGraph reads and parses the graph a durable session runs.
func storedGraph(ctx context.Context, b *broker.Broker, id string, stderr io.Writer) (*graph.Graph, string, error) {
	meta, err := session.ReadMeta(ctx, b, id)
	if errors.Is(err, session.ErrNoCheckpoint) {
		// Never started here, or killed while it was being created: nothing
		// of it can be resumed. What an interrupted start left is removed,
		// so that the id is free again.
		if rerr := session.RemoveUnrecorded(ctx, b, id); rerr != nil {
			fmt.Fprintf(stderr, "removing what the interrupted start left: %v\n", rerr)
		}
		return nil, "", &exitError{code: 1, err: fmt.Errorf("nothing of session %s is recorded in this store (a run killed before it recorded its first checkpoint leaves nothing; or is it on another --data or --nats?): start it with: switchyard run FILE.dot --id %s", id, id)}
	}
	if err != nil {
		return nil, "", &exitError{code: 1, err: err}
	}
	src, err := session.ReadGraph(ctx, b, id)
	if err != nil {
		return nil, "", &exitError{code: 1, err: err}
	}
	opts := []graph.LoadOption{graph.WithKnownTypes(builtinTypes()...)}
	if meta.Kind == "session" {
		opts = append(opts, graph.AsSession())
	}
	name := id + ".dot"
	g, diags := graph.Load(name, src, opts...)
	if g == nil || diags.HasErrors() {
		for _, d := range diags {
			fmt.Fprintln(stderr, d.String())
		}
		return nil, "", &exitError{code: 1, err: fmt.Errorf("session %s: its stored graph does not load", id)}
	}
	return g, name, nil
}

// runDirSession reads the session id a run directory belongs to.
func runDirSession(dir string) string {
	data, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return ""
	}
	var m struct {
		ID string `json:"session_id"`
	}
	_ = json.Unmarshal(data, &m)
	return m.ID
}

// serveResumed serves a resumed reactive session until it is stopped.
func serveResumed(ctx context.Context, cfg session.Config, g *graph.Graph, file string, obs *observers, stderr io.Writer) error {
	cfg.ControlAnswers = true
	cfg.Deps.Interviewer = nil
	s, err := session.Resume(ctx, cfg)
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	h := &host{b: cfg.Broker, stopped: make(chan string, 1), obs: obs}
	if err := h.add(s, g, file); err != nil {
		s.Stop()
		return &exitError{code: 1, err: err}
	}
	if err := h.listen(); err != nil {
		h.stopAll()
		return &exitError{code: 1, err: err}
	}
	fmt.Fprintf(stderr, "serving resumed session %s\n", s.ID())
	select {
	case id := <-h.stopped:
		fmt.Fprintf(stderr, "session %s stopped\n", id)
	case <-ctx.Done():
		fmt.Fprintln(stderr, "stopping: running handlers are cancelled, checkpoints are kept")
		h.stopAll()
	}
	return nil
}

func newHistoryCmd() *cobra.Command {
	var nats, data string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "history SESSION",
		Short: "List a durable session's checkpoints (node, time, outcome)",
		Args:  sessionArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(cmd, nats, data, func(ctx context.Context, b *broker.Broker) error {
				return printHistory(ctx, cmd.OutOrStdout(), b, args[0], asJSON)
			})
		},
	}
	cmd.Flags().StringVar(&nats, "nats", "", "the NATS server the session ran on (default: the embedded one on --data)")
	cmd.Flags().StringVar(&data, "data", "", "JetStream data directory of the embedded server (default: the user's state dir)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per checkpoint")
	return cmd
}

// withStore runs f with the store of --nats or --data open.
func withStore(cmd *cobra.Command, nats, data string, f func(ctx context.Context, b *broker.Broker) error) error {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	b, err := openStore(ctx, nats, data)
	if err != nil {
		return err
	}
	defer b.Close()
	return f(ctx, b)
}

// printHistory prints a session's checkpoints as a table or JSON lines.
func printHistory(ctx context.Context, out io.Writer, b *broker.Broker, id string, asJSON bool) error {
	hist, err := session.History(ctx, b, id)
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	if asJSON {
		enc := json.NewEncoder(out)
		for _, h := range hist {
			_ = enc.Encode(h)
		}
		return nil
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "CHECKPOINT\tTIME\tNODE\tFIRING\tOUTCOME\tCONSUMED\tPRODUCED\tEND")
	for _, h := range hist {
		status := h.Status
		if h.Reason != "" {
			status += ": " + h.Reason
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%s\t%d\t%d\t%s\n", h.Seq, h.Time.Format(time.RFC3339), h.Node, h.Firing,
			status, h.Consumed, h.Produced, h.Terminal)
	}
	return w.Flush()
}

// openStore starts the embedded server on data (or connects to nats) to
// read sessions' stores.
func openStore(ctx context.Context, nats, data string) (*broker.Broker, error) {
	cfg := broker.DefaultConfig()
	cfg.URL = nats
	if data != "" {
		cfg.DataDir = data
	}
	b, err := broker.Start(ctx, cfg)
	if err != nil {
		return nil, &exitError{code: 1, err: err}
	}
	return b, nil
}

// startOrResume starts a served session, or resumes it when the store has
// it running already (a process serving it died).
func startOrResume(ctx context.Context, f *serveFlags, cfg session.Config, stderr io.Writer) (*session.Session, error) {
	if f.durable && f.resume && cfg.ID != "" {
		if cp, err := session.LoadCheckpoint(ctx, cfg.Broker, cfg.ID, 0); err == nil && cp.Status == "running" {
			fmt.Fprintf(stderr, "resuming session %s from checkpoint %d\n", cfg.ID, cp.Seq)
			return session.Resume(ctx, cfg)
		}
	}
	return session.Start(ctx, cfg)
}

func newGCCmd() *cobra.Command {
	var nats, data string
	var retain time.Duration
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Remove completed durable sessions older than --retain (streams, checkpoints, artifacts)",
		Long: `gc removes the durable sessions of the store that completed (success or fail) more than
--retain ago: their work stream, event stream, checkpoint bucket and artifacts. Running
sessions are never removed. run and serve do the same on start.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkRetain(retain); err != nil {
				return err
			}
			return withStore(cmd, nats, data, func(ctx context.Context, b *broker.Broker) error {
				removed, err := session.GC(ctx, b, retain, time.Now(), dryRun)
				verb := "removed"
				if dryRun {
					verb = "would remove"
				}
				for _, id := range removed {
					fmt.Fprintf(cmd.OutOrStdout(), "%s session %s\n", verb, id)
				}
				if err != nil {
					return &exitError{code: 1, err: err}
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&nats, "nats", "", "the NATS server the sessions run on (default: the embedded one on --data)")
	cmd.Flags().StringVar(&data, "data", "", "JetStream data directory of the embedded server (default: the user's state dir)")
	cmd.Flags().DurationVar(&retain, "retain", session.DefaultRetain, "keep completed sessions this long")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list what would be removed")
	return cmd
}

// collect removes expired sessions (run and serve call it on start).
func collect(ctx context.Context, b *broker.Broker, retain time.Duration, stderr io.Writer) {
	if retain <= 0 {
		return
	}
	removed, err := session.GC(ctx, b, retain, time.Now(), false)
	for _, id := range removed {
		fmt.Fprintf(stderr, "removed session %s (completed more than %s ago)\n", id, retain)
	}
	if err != nil {
		fmt.Fprintf(stderr, "gc: %v\n", err)
	}
}
