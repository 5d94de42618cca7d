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
stopped (as by serve). A session stopped with switchyard stop is ended: resume refuses it,
naming who stopped it and when, unless --reopen says to run it again.

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
	fl.BoolVar(&f.reopen, "reopen", false, "run a session that was stopped with switchyard stop again (recorded as reopened by $USER)")
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
	sf := &storeFlags{}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "history SESSION",
		Short: "List a durable session's checkpoints (node, time, outcome)",
		Args:  sessionArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(cmd, sf, func(ctx context.Context, b *broker.Broker) error {
				return printHistory(ctx, cmd.OutOrStdout(), b, args[0], asJSON)
			})
		},
	}
	sf.add(cmd, "the NATS server the session ran on (default: the embedded one on --data)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per checkpoint")
	return cmd
}

// storeFlags are how the commands that read or write sessions' stores
// (history, gc) reach them: the embedded server on --data, or --nats with
// a credential, as for the other remote commands.
type storeFlags struct {
	nats, data                   string
	token, user, password, tlsCA string
}

func (sf *storeFlags) add(cmd *cobra.Command, natsHelp string) {
	fl := cmd.Flags()
	fl.StringVar(&sf.nats, "nats", "", natsHelp)
	fl.StringVar(&sf.data, "data", "", "JetStream data directory of the embedded server (default: the user's state dir)")
	sf.addCredentials(cmd)
}

// addCredentials adds --token, --user, --password and --tls-ca, for a
// --nats server.
func (sf *storeFlags) addCredentials(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&sf.token, "token", os.Getenv("SWITCHYARD_TOKEN"), "with --nats: credential token (env SWITCHYARD_TOKEN); a served listener's stores need the admin token")
	fl.StringVar(&sf.user, "user", os.Getenv("SWITCHYARD_USER"), "with --nats: user name (env SWITCHYARD_USER)")
	fl.StringVar(&sf.password, "password", os.Getenv("SWITCHYARD_PASSWORD"), "with --nats: password (env SWITCHYARD_PASSWORD)")
	fl.StringVar(&sf.tlsCA, "tls-ca", os.Getenv("SWITCHYARD_TLS_CA"), "with --nats: PEM file of the CA that signed the server's TLS certificate (env SWITCHYARD_TLS_CA)")
}

// config is the broker configuration the flags give.
func (sf *storeFlags) config() broker.Config {
	cfg := broker.DefaultConfig()
	cfg.URL = sf.nats
	if sf.data != "" {
		cfg.DataDir = sf.data
	}
	if sf.nats != "" {
		cfg.Token, cfg.User, cfg.Password, cfg.TLSCA = sf.token, sf.user, sf.password, sf.tlsCA
	}
	return cfg
}

// withStore runs f with the store of --nats or --data open.
func withStore(cmd *cobra.Command, sf *storeFlags, f func(ctx context.Context, b *broker.Broker) error) error {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	b, err := openStore(ctx, sf.config(), cmd.Name())
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

// openStore starts the embedded server on cfg's data directory (or
// connects to cfg's server) to read and write sessions' stores. On a
// server whose credential may not use JetStream (an outside token of a
// served listener) it says so rather than timing out.
func openStore(ctx context.Context, cfg broker.Config, command string) (*broker.Broker, error) {
	if cfg.URL != "" {
		if err := checkStoreAccess(cfg, command); err != nil {
			return nil, err
		}
	}
	b, err := broker.Start(ctx, cfg)
	if err != nil {
		return nil, &exitError{code: 1, err: err}
	}
	return b, nil
}

// checkStoreAccess asks the server for JetStream's account information
// with cfg's credential: a permissions violation means the credential is
// not the admin one.
func checkStoreAccess(cfg broker.Config, command string) error {
	c := &connFlags{url: cfg.URL, token: cfg.Token, user: cfg.User, password: cfg.Password, tlsCA: cfg.TLSCA, timeout: 5 * time.Second}
	nc, denied, err := c.dial()
	if err != nil {
		return err
	}
	defer nc.Close()
	_, err = requestOrDenied(nc, denied, "$JS.API.INFO", nil, c.timeout)
	if errors.Is(err, errPermissionDenied) {
		return &exitError{code: 1, err: fmt.Errorf("%s: %w (the sessions' store on %s)", command, err, cfg.URL)}
	}
	return nil // anything else shows when the store is used
}

// startOrResume starts a served session, or resumes it when the store has
// it running already (a process serving it died) — in the run and work
// directories it recorded, as the sessions serve adopts, not in this
// process's.
func startOrResume(ctx context.Context, f *serveFlags, cfg session.Config, stderr io.Writer) (*session.Session, error) {
	if f.durable && f.resume && cfg.ID != "" {
		if cp, err := session.LoadCheckpoint(ctx, cfg.Broker, cfg.ID, 0); err == nil && cp.Status == "running" {
			if m, err := session.ReadMeta(ctx, cfg.Broker, cfg.ID); err == nil {
				if m.LogsDir != "" {
					cfg.LogsDir = m.LogsDir
				}
				if m.WorkDir != "" {
					cfg.WorkDir = m.WorkDir
				}
			}
			fmt.Fprintf(stderr, "resuming session %s from checkpoint %d\n", cfg.ID, cp.Seq)
			return session.Resume(ctx, cfg)
		}
	}
	return session.Start(ctx, cfg)
}

func newGCCmd() *cobra.Command {
	sf := &storeFlags{}
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
			return withStore(cmd, sf, func(ctx context.Context, b *broker.Broker) error {
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
	sf.add(cmd, "the NATS server the sessions run on (default: the embedded one on --data)")
	cmd.Flags().DurationVar(&retain, "retain", session.DefaultRetain, "keep completed sessions this long")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list what would be removed")
	return cmd
}

// collect removes expired sessions (run and serve call it on start unless
// the store was collected less than an hour ago, serve also hourly).
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

// collectEvery is how often run and serve collect an embedded store: the
// scan reads every stored session's records (about half a millisecond
// each), which a store keeping a week of sessions made every start pay.
const collectEvery = time.Hour

// gcStampFile, in an embedded server's data directory, is touched by each
// collection that run and serve make; its time is that of the last one.
const gcStampFile = "switchyard.gc"

// collectDue collects on b unless the embedded store was collected less
// than collectEvery (or retain, when shorter) ago, which its stamp file
// says. A store on --nats has no stamp: it is collected every time.
func collectDue(ctx context.Context, b *broker.Broker, retain time.Duration, stderr io.Writer) {
	if retain <= 0 {
		return
	}
	if dir := b.DataDir(); dir != "" {
		if st, err := os.Stat(filepath.Join(dir, gcStampFile)); err == nil {
			if age := time.Since(st.ModTime()); age >= 0 && age < min(retain, collectEvery) {
				return
			}
		}
	}
	collectStamped(ctx, b, retain, stderr)
}

// collectStamped collects on b and, on an embedded store, stamps the
// collection.
func collectStamped(ctx context.Context, b *broker.Broker, retain time.Duration, stderr io.Writer) {
	if retain <= 0 {
		return
	}
	collect(ctx, b, retain, stderr)
	dir := b.DataDir()
	if dir == "" {
		return
	}
	stamp := filepath.Join(dir, gcStampFile)
	now := time.Now()
	if err := os.Chtimes(stamp, now, now); errors.Is(err, os.ErrNotExist) {
		_ = os.WriteFile(stamp, nil, 0o600)
	}
}
