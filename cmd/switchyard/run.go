package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/nodes/agent"
	"github.com/switchyard/switchyard/nodes/agent/llmapi"
	"github.com/switchyard/switchyard/observe"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

func init() { subcommands = append(subcommands, newRunCmd) }

type runFlags struct {
	logs     string
	workdir  string
	mock     string
	roles    string
	prices   string
	answers  []string
	provider string
	override bool
	nats     string
	data     string
	creds    storeFlags // --user, --password, --tls-ca for --nats (--token is token)
	json     bool
	resume   string
	durable  bool
	id       string
	// durableSet: --durable was given (else --resume DIR finds out).
	durableSet bool

	replicas int

	// Set by `switchyard resume`: the durable session to resume (its graph
	// is read from its bucket), and for a fork the checkpoint and new id.
	resumeID string
	from     uint64
	forkAs   string
	reopen   bool
	retain   time.Duration

	web               webFlags
	token, adminToken string // the web view's credentials
}

func newRunCmd() *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "run FILE.dot",
		Short: "Run a pipeline to completion",
		Long: `Run loads a DOT pipeline, validates it and runs it on an embedded NATS server
(or the server given by --nats). Exit status: 0 when the pipeline succeeds, 1 when it
fails, 2 for invalid input or usage.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErr(fmt.Errorf("run takes one DOT file, got %d arguments", len(args)))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkSessionID("--id", f.id); err != nil {
				return err
			}
			f.durableSet = cmd.Flags().Changed("durable")
			if err := checkRetain(f.retain); err != nil {
				return err
			}
			return runPipeline(cmd.Context(), f, args[0], cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f.addSessionFlags(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.resume, "resume", "", "resume the run whose run directory is DIR")
	fl.BoolVar(&f.durable, "durable", true, "keep the session in JetStream: it survives a crash and can be resumed by id (--durable=false: core NATS only, checkpoint.json only)")
	fl.StringVar(&f.id, "id", "", "session id (default: generated)")
	fl.DurationVar(&f.retain, "retain", session.DefaultRetain, "on start, remove durable sessions completed longer ago than this (0 keeps them)")
	return cmd
}

// addSessionFlags adds the flags run and resume share.
func (f *runFlags) addSessionFlags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.logs, "logs", "", "run directory (default .switchyard/runs/SESSION)")
	fl.StringVar(&f.workdir, "workdir", "", "where tools and agents work, e.g. . for the current repository (default: the run directory)")
	fl.StringVar(&f.mock, "mock", "", "JSON script for the mock agent provider")
	fl.StringVar(&f.roles, "roles", "", "directory of agent roles (ROLE.md), added to the built-in ones")
	fl.StringVar(&f.prices, "prices", "", "JSON price table (per million tokens), added to the built-in one")
	fl.StringArrayVar(&f.answers, "answer", nil, "pre-set human answer NODE=CHOICE (repeatable, queued per node)")
	fl.StringVar(&f.provider, "provider", "mock", "default agent provider: mock, claude, codex, gemini-cli, command, openai, anthropic, gemini")
	fl.BoolVar(&f.override, "override-providers", false, "run every agent node on --provider, whatever its llm_provider or llm_model say (--provider mock: a dry run)")
	fl.StringVar(&f.nats, "nats", "", "the NATS server to run on instead of an embedded one")
	fl.IntVar(&f.replicas, "replicas", 0, "copies JetStream keeps of the session's stream, buckets and objects (3 on a cluster; default: the graph's replicas, else 1)")
	// --token (below) is also the --nats credential.
	fl.StringVar(&f.creds.user, "user", os.Getenv("SWITCHYARD_USER"), "with --nats: user name (env SWITCHYARD_USER)")
	fl.StringVar(&f.creds.password, "password", os.Getenv("SWITCHYARD_PASSWORD"), "with --nats: password (env SWITCHYARD_PASSWORD)")
	fl.StringVar(&f.creds.tlsCA, "tls-ca", os.Getenv("SWITCHYARD_TLS_CA"), "with --nats: PEM file of the CA that signed the server's TLS certificate (env SWITCHYARD_TLS_CA)")
	fl.StringVar(&f.data, "data", "", "JetStream data directory of the embedded server (default: the user's state dir)")
	fl.BoolVar(&f.json, "json", false, "print one JSON object per event on stdout")
	f.web.add(cmd)
	fl.StringVar(&f.token, "token", os.Getenv("SWITCHYARD_TOKEN"), "credential of the web view's readers, and for --nats (env SWITCHYARD_TOKEN)")
	fl.StringVar(&f.adminToken, "admin-token", os.Getenv("SWITCHYARD_ADMIN_TOKEN"), "credential of the web view's actors: answer gates, trigger nodes (env SWITCHYARD_ADMIN_TOKEN)")
}

// checkSessionID refuses a session id given by flag that cannot name a
// session (a usage error, exit 2); "" is not given.
func checkSessionID(flag, id string) error {
	if id != "" && !broker.ValidToken(id) {
		return usageErr(fmt.Errorf("%s %q: invalid session id ([A-Za-z_][A-Za-z0-9_-]*: no '.', '*', '>' or spaces)", flag, id))
	}
	return nil
}

// checkRetain refuses a negative --retain.
func checkRetain(d time.Duration) error {
	if d < 0 {
		return usageErr(fmt.Errorf("--retain %s: want a duration of 0 (keep everything) or more", d))
	}
	return nil
}

// parseAnswers reads NODE=CHOICE flags into queues per node, in order.
func parseAnswers(list []string) (map[string][]string, error) {
	out := map[string][]string{}
	for _, a := range list {
		node, choice, ok := strings.Cut(a, "=")
		if !ok || node == "" {
			return nil, fmt.Errorf("--answer %q: want NODE=CHOICE", a)
		}
		out[node] = append(out[node], choice)
	}
	return out, nil
}

func runPipeline(ctx context.Context, f *runFlags, file string, stdin io.Reader, stdout, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	answers, err := parseAnswers(f.answers)
	if err != nil {
		return usageErr(err)
	}
	if err := f.web.check(webCreds{token: f.token, admin: f.adminToken}); err != nil {
		return err
	}
	providers, err := newProviders(providerFiles{mock: f.mock, roles: f.roles, prices: f.prices, override: f.override})
	if err != nil {
		return usageErr(err)
	}
	var g *graph.Graph
	if f.resumeID == "" {
		var diags graph.Diagnostics
		g, diags = graph.LoadFile(file, graph.WithKnownTypes(builtinTypes()...))
		for _, d := range diags {
			fmt.Fprintln(stderr, d.String())
		}
		if g == nil || diags.HasErrors() {
			return &exitError{code: 2}
		}
		if g.Kind() == "session" && f.resume == "" {
			return usageErr(fmt.Errorf("%s is a reactive session (kind=\"session\"): it runs until stopped, not to an end; serve it with: switchyard serve %s", file, file))
		}
		if err := providers.check(ctx, g, f.provider); err != nil {
			return usageErr(err)
		}
		if err := checkTypos(g, providers.mock.Nodes(), answers); err != nil {
			return usageErr(err)
		}
	}
	ctx, stop := interruptible(ctx)
	defer stop()

	sf := f.creds
	sf.nats, sf.data, sf.token = f.nats, f.data, f.token
	command := "run"
	if f.resumeID != "" {
		command = "resume"
	}
	b, err := openStore(ctx, sf.config(), command)
	if err != nil {
		return err
	}
	defer b.Close()
	obs, err := startObservers(ctx, &f.web, webCreds{token: f.token, admin: f.adminToken}, b, f.provider, stderr)
	if err != nil {
		return err
	}
	defer obs.close()
	if f.durable {
		collectDue(ctx, b, f.retain, stderr)
	}
	if f.resumeID != "" {
		// The graph the session runs is in its bucket.
		if g, file, err = storedGraph(ctx, b, f.resumeID, stderr); err != nil {
			return err
		}
		if err := providers.check(ctx, g, f.provider); err != nil {
			return usageErr(err)
		}
		if err := checkTypos(g, providers.mock.Nodes(), answers); err != nil {
			return usageErr(err)
		}
	}

	queue := nodes.NewQueue(answers)
	var iv nodes.Interviewer = queue
	switch {
	case obs.answersOnPage():
		// Gates without a pre-set answer wait for the web page's
		// (ControlAnswers below).
	case isTerminal(stdin):
		iv = session.Fallback(iv, nodes.Console(stdin, stderr))
	default:
		iv = session.Fallback(iv, noTerminal{})
	}
	id := f.id
	switch {
	case f.forkAs != "":
		id = f.forkAs
	case f.resumeID != "":
		id = f.resumeID
	case id == "":
		id = session.NewID()
	}
	logs := f.logs
	if f.resume != "" {
		logs = f.resume
	}
	if logs == "" {
		logs = filepath.Join(".switchyard", "runs", id)
	}
	if f.resumeID != "" && f.logs == "" {
		// A session resumes in the run directory it recorded; a fork gets
		// its own next to it (<runs>/<new id>).
		if m, err := session.ReadMeta(ctx, b, f.resumeID); err == nil && m.LogsDir != "" {
			logs = m.LogsDir
			if f.forkAs != "" {
				logs = filepath.Join(filepath.Dir(m.LogsDir), f.forkAs)
			}
		}
	}
	var render func(*pb.Event)
	if f.json {
		render = newJSONRenderer(stdout).render
	} else {
		render = (&textRenderer{w: stderr}).render
	}
	cfg := session.Config{
		ID: id, Graph: g, Broker: b, LogsDir: logs, WorkDir: f.workdir, Durable: f.durable, Observer: render, Replicas: f.replicas,
		ControlAnswers: obs.answersOnPage(), // gates without a pre-set answer are answered on the page
		Deps:           nodes.Deps{Providers: providers.lookup, DefaultProvider: f.provider, OverrideProviders: f.override, Interviewer: iv},
	}
	if obs.tp != nil {
		// The run is a trace: every firing span is under this one.
		sctx, span := obs.tp.Tracer("github.com/switchyard/switchyard/cmd").Start(ctx, "run "+g.Name)
		defer span.End()
		cfg.Caller.Trace = observe.TraceParent(sctx)
	}
	if hasInteractive(g) {
		// Interactive agents talk with the person at this terminal (or
		// with the lines piped in).
		conv := newConversation(b.Conn(), stdin, stderr)
		cfg.Observer = func(ev *pb.Event) { render(ev); conv.observe(ev) }
		cctx, stop := context.WithCancel(ctx)
		done := conv.start(cctx)
		defer func() { stop(); <-done }()
	}
	// The session's id first: the observers label by it.
	switch {
	case f.resumeID != "":
		cfg.ID, cfg.Durable = f.resumeID, true
		if m, err := session.ReadMeta(ctx, b, f.resumeID); err == nil {
			// Where it worked before, unless told otherwise: a fork too,
			// unless that was the original's own run directory (the
			// default), where the fork works in its own.
			if f.workdir == "" && (f.forkAs == "" || m.WorkDir != m.LogsDir) {
				cfg.WorkDir = m.WorkDir
			}
			cfg.File = m.File
		}
		if f.forkAs != "" {
			cfg.ID, cfg.ForkOf, cfg.FromCheckpoint = f.forkAs, f.resumeID, f.from
		}
		cfg.Reopen, cfg.ReopenedBy = f.reopen, os.Getenv("USER")
	case f.resume != "":
		cfg.ID = f.id // the checkpoint's id unless --id is given
		sid := runDirSession(f.resume)
		if cfg.Durable && !f.durableSet && sid != "" {
			// A run directory of a --durable=false run resumes as one:
			// the store has no record of its session.
			if _, err := session.ReadMeta(ctx, b, sid); errors.Is(err, session.ErrNoCheckpoint) {
				cfg.Durable = false
			}
		}
		if cfg.Durable && cfg.ID == "" {
			cfg.ID = sid
		}
		if cfg.ID == "" {
			if cp, err := session.ReadCheckpoint(f.resume); err == nil {
				cfg.ID = cp.SessionID
			}
		}
	}
	obs.instrument(&cfg)
	var s *session.Session
	switch {
	case f.resumeID != "":
		if g.Kind() == "session" {
			return serveResumed(ctx, cfg, g, file, obs, stderr)
		}
		s, err = session.Resume(ctx, cfg)
	case f.resume != "":
		s, err = session.Resume(ctx, cfg)
	default:
		cfg.File = absPath(file)
		s, err = session.Start(ctx, cfg)
	}
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	defer obs.add(s, file)()
	rep, err := s.Wait(ctx)
	if !f.json {
		printSummary(stderr, rep, cfg.LogsDir)
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return &exitError{code: 1, err: fmt.Errorf("interrupted; resume with: %s", resumeCommand(f, file, s.ID(), cfg, queue))}
		}
		return &exitError{code: 1, err: err}
	}
	if rep.Status != "success" {
		return &exitError{code: 1}
	}
	return nil
}

// resumeCommand is the whole command that continues an interrupted run:
// the session by id (durable) or the run directory (not), with the flags
// that shaped the run and are not recorded — the store, the agents'
// configuration, the answers not used yet, the output format.
func resumeCommand(f *runFlags, file, id string, cfg session.Config, queue *nodes.Queue) string {
	var args []string
	if cfg.Durable {
		args = []string{"switchyard", "resume", id}
		if f.nats != "" {
			args = append(args, "--nats", f.nats)
			if f.token != "" {
				args = append(args, "--token", "<token>")
			} else if f.creds.user != "" {
				args = append(args, "--user", f.creds.user, "--password", "<password>")
			}
			if f.creds.tlsCA != "" {
				args = append(args, "--tls-ca", f.creds.tlsCA)
			}
		} else if f.data != "" {
			args = append(args, "--data", f.data)
		}
	} else {
		args = []string{"switchyard", "run", file, "--resume", cfg.LogsDir, "--durable=false"}
		if f.id != "" {
			args = append(args, "--id", f.id)
		}
		if f.data != "" {
			args = append(args, "--data", f.data)
		}
	}
	for _, fl := range []struct{ name, value string }{{"--mock", f.mock}, {"--roles", f.roles}, {"--prices", f.prices}} {
		if fl.value != "" {
			args = append(args, fl.name, fl.value)
		}
	}
	if f.provider != "" && f.provider != "mock" {
		args = append(args, "--provider", f.provider)
	}
	left := queue.Remaining()
	for _, node := range sortedKeys(left) {
		for _, choice := range left[node] {
			args = append(args, "--answer", node+"="+choice)
		}
	}
	if f.json {
		args = append(args, "--json")
	}
	for i, a := range args {
		args[i] = shellQuote(a)
	}
	return strings.Join(args, " ")
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%<>", r))
	}) < 0 && !strings.ContainsAny(s, "<>") {
		return s
	}
	if s == "<token>" || s == "<password>" {
		return s // placeholders for the secret, to fill in
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// printSummary is the final report a person reads.
func printSummary(w io.Writer, rep *session.Report, logs string) {
	fmt.Fprintf(w, "\n%-24s %-16s %6s %8s %12s  %s\n", "NODE", "STATUS", "VISITS", "ATTEMPTS", "DURATION", "USAGE")
	for _, n := range rep.Nodes {
		usage := ""
		if n.Usage.InputTokens+n.Usage.OutputTokens > 0 || n.Usage.Cost > 0 {
			usage = fmt.Sprintf("%d in / %d out tokens, $%.4f", n.Usage.InputTokens, n.Usage.OutputTokens, n.Usage.Cost)
		}
		fmt.Fprintf(w, "%-24s %-16s %6d %8d %12s  %s\n", n.Node, n.Status, n.Visits, n.Attempts, n.Duration, usage)
	}
	fmt.Fprintf(w, "\nsession %s: %s", rep.SessionID, rep.Status)
	if rep.Reason != "" {
		fmt.Fprintf(w, " (%s)", rep.Reason)
	}
	if u := rep.Usage; u.InputTokens+u.OutputTokens > 0 || u.Cost > 0 {
		fmt.Fprintf(w, "; %d in / %d out tokens, $%.4f", u.InputTokens, u.OutputTokens, u.Cost)
	}
	fmt.Fprintf(w, "\nrun directory: %s\n", logs)
}

// isTerminal reports whether r is a terminal (not merely a character
// device: /dev/null is one, and a run started from cron or CI with stdin
// on /dev/null has no one to ask).
func isTerminal(r any) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// noTerminal answers the human gates of a run that has no terminal to ask
// at once its --answer queue is empty: the gate fails, saying how to
// answer it.
type noTerminal struct{}

func (noTerminal) Ask(_ context.Context, q *nodes.Question) (*nodes.Answer, error) {
	return nil, fmt.Errorf("human gate %s has no answer: stdin is not a terminal to ask at and no --answer %s=CHOICE is left (choose one of %s)",
		q.Stage, q.Stage, nodes.OptionList(q.Options))
}

// providers resolves agent providers by name for the handlers.
type providerSet struct {
	mock     *agent.Mock
	reg      *agent.Registry
	roles    map[string]agent.Role
	override bool
}

// providerFiles configure the providers: the mock's script, a directory
// of roles, a price table ("" = none); override runs every agent node on
// the default provider (--override-providers).
type providerFiles struct {
	mock, roles, prices string
	override            bool
}

// newProviders registers the mock, the CLI providers (claude, codex,
// gemini-cli, command) and the model APIs (openai, anthropic, gemini),
// configured with the roles and prices given.
func newProviders(files providerFiles) (*providerSet, error) {
	var m *agent.Mock
	if files.mock != "" {
		var err error
		if m, err = agent.LoadMockFile(files.mock); err != nil {
			return nil, err
		}
	} else {
		m = agent.NewMock(nil)
	}
	roles := agent.BuiltinRoles()
	if files.roles != "" {
		var err error
		if roles, err = agent.LoadRoles(files.roles); err != nil {
			return nil, err
		}
	}
	prices := agent.DefaultPrices()
	if files.prices != "" {
		var err error
		if prices, err = agent.LoadPrices(files.prices); err != nil {
			return nil, err
		}
	}
	reg := agent.NewRegistry()
	reg.Register("mock", m)
	agent.RegisterCLI(reg, agent.CLIOptions{Roles: roles, Prices: prices})
	llmapi.Register(reg, llmapi.Options{Roles: roles, Prices: prices})
	return &providerSet{mock: m, reg: reg, roles: roles, override: files.override}, nil
}

func (p *providerSet) lookup(name string) (agent.Provider, error) { return p.reg.Lookup(name) }

// nodeChecker is implemented by providers whose readiness depends on the
// node (the command provider checks the node's agent_command).
type nodeChecker interface {
	CheckNode(ctx context.Context, attrs map[string]string) error
}

// agentProvider is the provider an agent node runs with (the codergen
// handler's order: llm_provider, the model's provider, the default; with
// override, the default always); ok is false for nodes that run no agent.
func agentProvider(g *graph.Graph, n *graph.Node, def string, override bool) (name string, ok bool) {
	switch g.HandlerType(n) {
	case graph.TypeCodergen:
	case graph.TypeConditional:
		if n.Attrs.String("prompt") == "" {
			return "", false
		}
	default:
		return "", false
	}
	if !override {
		name = n.Attrs.String("llm_provider")
		if name == "" {
			name = agent.InferProvider(n.Attrs.String("llm_model"))
		}
	}
	if name == "" {
		name = def
	}
	if name == "" {
		name = "mock"
	}
	return name, true
}

// problems lists, before anything runs, what would stop the graph's agents
// from running: an unknown provider, a missing CLI executable (once per
// provider, at the first node that uses it), a node's missing
// agent_command, a role no provider knows.
func (p *providerSet) problems(ctx context.Context, g *graph.Graph, def string) []graph.Diagnostic {
	var out []graph.Diagnostic
	add := func(n *graph.Node, msg string) {
		out = append(out, graph.Diagnostic{Pos: n.Pos, Severity: graph.SeverityError, Rule: "provider_ready", Message: msg, NodeID: n.ID})
	}
	seen := map[string]bool{}
	for _, n := range g.Nodes {
		name, ok := agentProvider(g, n, def, p.override)
		if !ok {
			continue
		}
		first := !seen[name]
		seen[name] = true
		pr, err := p.reg.Lookup(name)
		if err != nil {
			if first {
				add(n, err.Error())
			}
			continue
		}
		if nc, ok := pr.(nodeChecker); ok {
			attrs := map[string]string{}
			for _, k := range n.Attrs.Keys() {
				attrs[k] = n.Attrs.String(k)
			}
			if err := nc.CheckNode(ctx, attrs); err != nil {
				add(n, fmt.Sprintf("node %s: provider %s: %v", n.ID, name, err))
			}
		} else if c, ok := pr.(agent.Checker); ok && first {
			if err := c.Check(ctx); err != nil {
				add(n, fmt.Sprintf("provider %s: %v", name, err))
			}
		}
		if role := n.Attrs.String("role"); role != "" && pr != agent.Provider(p.mock) {
			if _, ok := p.roles[role]; !ok {
				add(n, fmt.Sprintf("node %s: unknown role %q (known: %s; add one with --roles DIR)", n.ID, role, roleList(p.roles)))
			}
		}
	}
	return out
}

// check verifies, before anything runs, that every provider the graph will
// use can run (a missing CLI is reported now, not mid-run).
func (p *providerSet) check(ctx context.Context, g *graph.Graph, def string) error {
	ds := p.problems(ctx, g, def)
	if len(ds) == 0 {
		return nil
	}
	msgs := make([]string, len(ds))
	for i, d := range ds {
		msgs[i] = d.Message
	}
	return errors.New(strings.Join(msgs, "\n"))
}

func roleList(roles map[string]agent.Role) string {
	names := make([]string, 0, len(roles))
	for n := range roles {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func builtinTypes() []string {
	r := nodes.NewRegistry()
	_ = nodes.RegisterBuiltins(r, nodes.Deps{})
	return r.Types()
}
