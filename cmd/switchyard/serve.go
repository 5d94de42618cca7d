package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/pool"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

func init() { subcommands = append(subcommands, newServeCmd) }

// SessionsSubject is where a serving process answers `switchyard sessions`.
const SessionsSubject = "switchyard.sessions"

// SessionInfo is one served session, as `switchyard sessions` lists it.
type SessionInfo struct {
	ID      string `json:"id"`
	Graph   string `json:"graph"`
	File    string `json:"file"`
	Status  string `json:"status"`
	Started string `json:"started"`
	// Version is the graph's version: 1, then one more per live edit.
	Version uint64 `json:"version"`
	// Nodes are the node ids of the graph the session runs now.
	Nodes []string `json:"nodes,omitempty"`
	// Waiting says why nobody runs a session of the store (status
	// "waiting"): no live member of the deployment may run it.
	Waiting string `json:"waiting,omitempty"`
	// Member is the deployment member that runs the session (serve
	// --takeover or --place).
	Member string `json:"member,omitempty"`
}

type serveFlags struct {
	ids                              []string
	listen, token, adminToken        string
	workerToken                      string
	poolTokens                       []string
	user, password, tlsCert, tlsKey  string
	nats, data, logs, provider, mock string
	override                         bool
	workdir                          string
	roles, prices                    string
	json                             bool
	durable, resume, all, takeover   bool
	place                            bool
	labels                           string
	settle                           time.Duration
	replicas                         int
	retain                           time.Duration
	dupes                            time.Duration
	journalKeep                      int
	maxHeld                          int
	web                              webFlags
}

func newServeCmd() *cobra.Command {
	f := &serveFlags{}
	cmd := &cobra.Command{
		Use:   "serve FILE.dot...",
		Short: "Serve reactive sessions until stopped",
		Long: `Serve starts one reactive session per file (every node broadcasts to the edges whose
condition holds, a human gate to its answer's edge only; no start or exit node is needed;
no firing cap applies unless the graph sets one, and a node that repeats the same answer to
the same input is stopped as stalled) and keeps them running until SIGINT or SIGTERM, or
until each is stopped with 'switchyard stop'. It prints a live log (--json: every event). With --listen the embedded NATS server accepts outside clients, who
must authenticate (--token, or --user and --password; env SWITCHYARD_TOKEN...).

Durable sessions of the same files that a process left running are resumed too, each in
its recorded run and work directory (--all: every running session of the store). A
session another live process serves is not: each session has one runner, which holds
its lease.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && !f.all {
				return usageErr(fmt.Errorf("serve needs at least one DOT file (or --all)"))
			}
			if len(f.ids) > 0 && len(f.ids) != len(args) {
				return usageErr(fmt.Errorf("--id given %d times for %d files", len(f.ids), len(args)))
			}
			for _, id := range f.ids {
				if err := checkSessionID("--id", id); err != nil {
					return err
				}
			}
			if _, err := parsePoolTokens(f.poolTokens); err != nil {
				return usageErr(fmt.Errorf("--pool-token: %w", err))
			}
			if _, err := session.ParseLabels(f.labels); err != nil {
				return usageErr(fmt.Errorf("--labels: %w", err))
			}
			if f.labels != "" && !f.takeover && !f.place {
				return usageErr(fmt.Errorf("--labels are a member's: add --takeover (or --place)"))
			}
			if f.place && (!f.durable || len(args) == 0) {
				return usageErr(fmt.Errorf("--place records durable sessions of DOT files: it needs files and --durable"))
			}
			if f.dupes != 0 && f.dupes < broker.MinDuplicateWindow {
				return usageErr(fmt.Errorf("--duplicate-window %s: at least %s", f.dupes, broker.MinDuplicateWindow))
			}
			if f.maxHeld < broker.MinMaxHeld {
				return usageErr(fmt.Errorf("--max-held %d: at least %d", f.maxHeld, broker.MinMaxHeld))
			}
			if f.journalKeep != 0 && f.journalKeep < broker.MinJournalKeep {
				return usageErr(fmt.Errorf("--journal-keep %d: at least %d", f.journalKeep, broker.MinJournalKeep))
			}
			return checkRetain(f.retain)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return serve(cmd.Context(), f, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVar(&f.ids, "id", nil, "session id, one per file in order (default: generated)")
	fl.StringVar(&f.listen, "listen", "", "expose the embedded NATS server on HOST:PORT (off by default)")
	fl.StringVar(&f.token, "token", os.Getenv("SWITCHYARD_TOKEN"), "credential of outside clients (env SWITCHYARD_TOKEN)")
	fl.StringVar(&f.adminToken, "admin-token", os.Getenv("SWITCHYARD_ADMIN_TOKEN"), "credential with control permissions (env SWITCHYARD_ADMIN_TOKEN)")
	fl.StringVar(&f.workerToken, "worker-token", os.Getenv("SWITCHYARD_WORKER_TOKEN"), "credential of switchyard worker processes: pool jobs and their outcomes only (env SWITCHYARD_WORKER_TOKEN)")
	fl.StringArrayVar(&f.poolTokens, "pool-token", splitList(os.Getenv("SWITCHYARD_POOL_TOKENS")), "POOL=TOKEN: the credential of the workers of one pool, who may serve that pool's jobs only; repeat for each pool (env SWITCHYARD_POOL_TOKENS, comma-separated)")
	fl.StringVar(&f.user, "user", os.Getenv("SWITCHYARD_USER"), "user name of outside clients")
	fl.StringVar(&f.password, "password", os.Getenv("SWITCHYARD_PASSWORD"), "password of outside clients")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "TLS certificate of the listener")
	fl.StringVar(&f.tlsKey, "tls-key", "", "TLS key of the listener")
	fl.StringVar(&f.nats, "nats", "", "run on this NATS server or cluster instead of an embedded one")
	fl.StringVar(&f.data, "data", "", "JetStream directory of the embedded server")
	fl.DurationVar(&f.dupes, "duplicate-window", broker.DefaultDuplicateWindow, "how long a session's work stream drops a second publish of an envelope id (Nats-Msg-Id); what was consumed is kept that long")
	fl.IntVar(&f.maxHeld, "max-held", broker.DefaultMaxHeld, "how many envelopes each durable session holds delivered and not yet consumed, about a kilobyte of memory each: at the bound the stream delivers more as they are consumed (a node that keeps that many waiting holds up the others)")
	fl.IntVar(&f.journalKeep, "journal-keep", session.JournalKeep, "how many journal records each durable session keeps: its history and the checkpoints a fork may start from; older ones are compacted")
	fl.StringVar(&f.logs, "logs", "", "root of the sessions' run directories (default .switchyard/sessions)")
	fl.StringVar(&f.workdir, "workdir", "", "where tools and agents work, e.g. . for the current repository (default: each session's run directory)")
	fl.StringVar(&f.provider, "provider", "mock", "default agent provider")
	fl.BoolVar(&f.override, "override-providers", false, "run every agent node on --provider, whatever its llm_provider or llm_model say")
	fl.StringVar(&f.mock, "mock", "", "JSON script for the mock provider")
	fl.StringVar(&f.roles, "roles", "", "directory of agent roles (ROLE.md), added to the built-in ones")
	fl.StringVar(&f.prices, "prices", "", "JSON price table (per million tokens), added to the built-in one")
	fl.BoolVar(&f.json, "json", false, "print every event as JSON on stdout")
	fl.BoolVar(&f.durable, "durable", true, "keep the sessions in JetStream (they survive a crash of this process)")
	fl.BoolVar(&f.resume, "resume", true, "on start, resume the durable sessions of these files that were running")
	fl.IntVar(&f.replicas, "replicas", 0, "copies JetStream keeps of each session's stream, buckets and objects (3 on a cluster; default: the graph's replicas, else 1)")
	fl.BoolVar(&f.takeover, "takeover", false, "keep watching the store and resume the sessions (of these files, or --all) whose runner died; serve with nothing to serve yet waits")
	fl.BoolVar(&f.place, "place", false, "record the sessions of these files in the store and let the deployment's members run them (placement spreads them; this process is a member too, as with --takeover)")
	fl.StringVar(&f.labels, "labels", "", "this member's labels, k=v,... (with --takeover or --place): a session whose graph sets placement=\"k=v,...\" runs only on members with those labels")
	fl.DurationVar(&f.settle, "settle", session.DefaultSettle, "a member hands running sessions over to members that joined later once the members stayed the same this long, and moves again no sooner (0: never moves running sessions)")
	fl.BoolVar(&f.all, "all", false, "on start, resume every running durable session of the store, whatever its file")
	fl.DurationVar(&f.retain, "retain", session.DefaultRetain, "remove durable sessions completed longer ago than this, hourly and on start unless the store was collected within the hour (0 keeps them)")
	f.web.add(cmd)
	return cmd
}

// maxParallelResumes bounds the sessions serve resumes at once (at
// start, and when it takes sessions over).
const maxParallelResumes = 8

// serveClock is the clock served sessions run on; nil is the real clock.
// Tests set it to drive cron schedules.
var serveClock clock.Clock

func serve(ctx context.Context, f *serveFlags, files []string, stdout, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := f.web.check(webCreds{token: f.token, admin: f.adminToken, user: f.user, password: f.password}); err != nil {
		return err
	}
	providers, err := newProviders(providerFiles{mock: f.mock, roles: f.roles, prices: f.prices, override: f.override})
	if err != nil {
		return usageErr(err)
	}
	graphs := make([]*graph.Graph, len(files))
	failed := false
	for i, file := range files {
		g, diags := graph.LoadFile(file, graph.AsSession(), graph.WithKnownTypes(builtinTypes()...))
		for _, d := range diags {
			fmt.Fprintln(stderr, d.String())
		}
		if g == nil || diags.HasErrors() {
			failed = true
		}
		graphs[i] = g
	}
	if failed {
		return &exitError{code: 2}
	}
	for _, g := range graphs {
		if err := providers.check(ctx, g, f.provider); err != nil {
			return usageErr(err)
		}
	}
	if len(graphs) == 1 {
		// With several files a script may name the nodes of any of them.
		if err := checkTypos(graphs[0], providers.mock.Nodes(), nil); err != nil {
			return usageErr(err)
		}
	}
	ctx, stop := interruptible(ctx)
	defer stop()
	bcfg := broker.DefaultConfig()
	bcfg.URL, bcfg.Listen = f.nats, f.listen
	bcfg.Token, bcfg.AdminToken, bcfg.User, bcfg.Password = f.token, f.adminToken, f.user, f.password
	if f.listen != "" {
		bcfg.WorkerToken = f.workerToken
		bcfg.PoolTokens, _ = parsePoolTokens(f.poolTokens) // checked with the flags
	}
	bcfg.TLSCert, bcfg.TLSKey = f.tlsCert, f.tlsKey
	bcfg.DuplicateWindow = f.dupes
	bcfg.JournalKeep = f.journalKeep
	bcfg.MaxHeld = f.maxHeld
	if f.data != "" {
		bcfg.DataDir = f.data
	}
	if err := bcfg.Validate(); err != nil {
		return usageErr(err) // the flags do not make a server
	}
	b, err := broker.Start(ctx, bcfg)
	if err != nil {
		// Not the command line's fault (exit 1): a server that cannot be
		// reached, a data directory another process serves.
		return &exitError{code: 1, err: err}
	}
	defer b.Close()
	logsRoot := f.logs
	if logsRoot == "" {
		logsRoot = filepath.Join(".switchyard", "sessions")
	}
	// A live log for people by default; --json prints every event.
	render := (&serveLog{w: stdout}).render
	if f.json {
		r := newJSONRenderer(stdout)
		var mu sync.Mutex
		render = func(ev *pb.Event) { mu.Lock(); r.render(ev); mu.Unlock() }
	}
	obs, err := startObservers(ctx, &f.web, webCreds{token: f.token, admin: f.adminToken, user: f.user, password: f.password}, b, f.provider, stderr)
	if err != nil {
		return err
	}
	defer obs.close()
	h := &host{b: b, stopped: make(chan string, 64), obs: obs}
	// A member of the deployment (--takeover, --place) runs the sessions
	// placement gives it (placement.go).
	member := f.durable && (f.takeover || f.place)
	var ms *session.Membership
	var pl *placer
	if member {
		labels, _ := session.ParseLabels(f.labels)
		self := session.Member{Labels: labels, All: f.all}
		for _, file := range files {
			self.Files = append(self.Files, absPath(file))
		}
		if ms, err = session.Join(ctx, b, self, serveClock, 0, f.replicas); err != nil {
			return &exitError{code: 1, err: err}
		}
		defer ms.Leave()
		pl = newPlacer(ms, b, h, stderr)
		if f.settle > 0 {
			pl.rb = session.NewRebalancer(f.settle, serveClock)
		}
		h.member = ms.ID()
		fmt.Fprintf(stderr, "member %s of the deployment, labels %q\n", ms.ID(), session.FormatLabels(labels))
	}
	for i, g := range graphs {
		id := session.NewID()
		if len(f.ids) > 0 {
			id = f.ids[i]
		}
		cfg := session.Config{ID: id, Graph: g, Broker: b, LogsDir: filepath.Join(logsRoot, id), WorkDir: f.workdir,
			ControlAnswers: true, Observer: render, Clock: serveClock, Durable: f.durable, File: absPath(files[i]), Replicas: f.replicas,
			Deps: nodes.Deps{Providers: providers.lookup, DefaultProvider: f.provider, OverrideProviders: f.override}}
		obs.instrument(&cfg)
		if f.place {
			if err := session.Create(ctx, cfg); err != nil {
				if _, merr := session.ReadMeta(ctx, b, id); merr != nil {
					h.stopAll()
					return &exitError{code: 1, err: err}
				}
				fmt.Fprintf(stderr, "session %s is in the store already: placed as it is\n", id)
			} else {
				fmt.Fprintf(stderr, "placed %s as session %s\n", files[i], id)
			}
			continue
		}
		s, err := startOrResume(ctx, f, cfg, stderr)
		if err != nil {
			h.stopAll()
			return &exitError{code: 1, err: err}
		}
		if err := h.add(s, g, files[i]); err != nil {
			h.stopAll()
			return &exitError{code: 1, err: err}
		}
		fmt.Fprintf(stderr, "serving %s as session %s\n", files[i], id)
	}
	served := len(files)
	if f.place {
		served = 0
		_ = b.Conn().Publish(PlaceSubject, nil) // the members scan now
	}
	if f.durable {
		// At most hourly, as run does (the stamp in the data directory):
		// the scan reads every session the store keeps.
		collectDue(ctx, b, f.retain, stderr)
		gcTick := time.NewTicker(time.Hour)
		defer gcTick.Stop()
		gcStop, gcDone := make(chan struct{}), make(chan struct{})
		defer func() { close(gcStop); <-gcDone }() // before the broker closes
		go func() {                                // owned by serve: ends when serve returns
			defer close(gcDone)
			for {
				select {
				case <-gcTick.C:
					collectStamped(ctx, b, f.retain, stderr)
				case <-gcStop:
					return
				}
			}
		}()
	}
	mine := map[string]bool{}
	for _, file := range files {
		mine[absPath(file)] = true
	}
	// adopt resumes the sessions of these files (or, with --all, of the
	// store) that a process left running, with the graph they ran, in
	// their own run and work directories. quiet skips, without a word,
	// those a live process holds (the rescans of --takeover).
	adopt := func(quiet bool) int {
		n := 0
		running, err := session.Running(ctx, b)
		if err != nil && !quiet {
			fmt.Fprintf(stderr, "listing the store's sessions: %v\n", err)
		}
		var cands []session.Meta
		for _, m := range running {
			if h.has(m.ID) || (!f.all && !mine[m.File]) {
				continue
			}
			if quiet || member {
				if o, err := session.ReadOwner(ctx, b, m.ID, time.Now()); err != nil || o != nil {
					continue
				}
			}
			cands = append(cands, m)
		}
		if member {
			cands = pl.choose(ctx, cands)
		}
		// The sessions resume side by side: on a cluster each resume is a
		// dozen JetStream round trips, and one after the other they put a
		// dead member's last session many seconds past its lease.
		type adoption struct {
			m    session.Meta
			g    *graph.Graph
			file string
			s    *session.Session
			err  error
		}
		todo := make([]*adoption, 0, len(cands))
		for _, m := range cands {
			g, file, err := storedGraph(ctx, b, m.ID, stderr)
			if err != nil {
				fmt.Fprintf(stderr, "session %s is not resumed: %v\n", m.ID, err)
				continue
			}
			if m.File != "" {
				file = m.File
			}
			todo = append(todo, &adoption{m: m, g: g, file: file})
		}
		var wg sync.WaitGroup
		slots := make(chan struct{}, maxParallelResumes)
		for _, a := range todo {
			m := a.m
			logs, work := m.LogsDir, m.WorkDir
			if logs == "" {
				logs = filepath.Join(logsRoot, m.ID)
			}
			if work == "" {
				work = f.workdir
			}
			cfg := session.Config{ID: m.ID, Graph: a.g, Broker: b, LogsDir: logs, WorkDir: work,
				ControlAnswers: true, Observer: render, Clock: serveClock, Durable: true, File: m.File, Replicas: f.replicas,
				Deps: nodes.Deps{Providers: providers.lookup, DefaultProvider: f.provider, OverrideProviders: f.override}}
			obs.instrument(&cfg)
			wg.Add(1)
			go func() {
				defer wg.Done()
				slots <- struct{}{}
				defer func() { <-slots }()
				a.s, a.err = session.Resume(ctx, cfg)
			}()
		}
		wg.Wait()
		for _, a := range todo {
			if a.err != nil {
				var held *session.HeldError
				if !quiet || !errors.As(a.err, &held) {
					fmt.Fprintf(stderr, "session %s is not resumed: %v\n", a.m.ID, a.err)
				}
				continue
			}
			if err := h.add(a.s, a.g, a.file); err != nil {
				a.s.Stop()
				continue
			}
			n++
			fmt.Fprintf(stderr, "resumed session %s (%s)\n", a.m.ID, a.m.Graph)
		}
		if member {
			ms.SetLoad(ctx, h.running())
		}
		return n
	}
	if f.durable && (f.resume || f.all || f.takeover || member) {
		served += adopt(false)
	}
	if served == 0 && !f.takeover && !member {
		h.stopAll()
		return &exitError{code: 1, err: fmt.Errorf("no session to serve")}
	}
	if err := h.listen(); err != nil {
		h.stopAll()
		return &exitError{code: 1, err: err}
	}
	if url := b.ClientURL(); url != "" {
		fmt.Fprintf(stderr, "outside clients connect to %s\n", url)
		if f.listen != "" && f.adminToken == "" {
			fmt.Fprintln(stderr, "warning: no --admin-token (env SWITCHYARD_ADMIN_TOKEN): the outside credential may publish and watch, "+
				"but no one can answer, trigger, stop or edit these sessions, nor read their stores, over the listener")
		}
	}
	// With --takeover the store is scanned every third of a lease's TTL:
	// a session whose owner died (its lease expired, or its process of
	// this host is gone) is resumed here.
	var rescan <-chan time.Time
	var scan clock.Timer
	clk := serveClock
	if clk == nil {
		clk = clock.Real()
	}
	var nudged chan *nats.Msg
	if member {
		nudged = make(chan *nats.Msg, 1)
		sub, err := b.Conn().ChanSubscribe(PlaceSubject, nudged)
		if err != nil {
			h.stopAll()
			return &exitError{code: 1, err: err}
		}
		defer func() { _ = sub.Unsubscribe() }()
	}
	if member {
		scan = clk.NewTimer(session.DefaultLeaseTTL / 3)
		defer scan.Stop()
		rescan = scan.C()
		fmt.Fprintln(stderr, "taking over the sessions whose runner dies")
	}
	for running := served; running > 0 || member; {
		select {
		case id := <-h.stopped:
			fmt.Fprintf(stderr, "session %s stopped\n", id)
			running--
			if member {
				ms.SetLoad(ctx, h.running())
			}
		case <-nudged:
			running += adopt(true)
		case <-rescan:
			running += adopt(true)
			if moved := pl.rebalance(ctx); len(moved) > 0 {
				ms.SetLoad(ctx, h.running())
				_ = b.Conn().Publish(PlaceSubject, nil) // the members scan now
			}
			scan.Reset(session.DefaultLeaseTTL / 3)
		case <-ctx.Done():
			fmt.Fprintln(stderr, "stopping: running handlers are cancelled, checkpoints are kept (a second Ctrl-C or SIGTERM quits at once; what was not recorded runs again on resume)")
			h.stopAll()
			return nil
		}
	}
	h.stopAll()
	return nil
}

// absPath is file's absolute path (file itself if it has none).
func absPath(file string) string {
	if p, err := filepath.Abs(file); err == nil {
		return p
	}
	return file
}

// host keeps the sessions a serve process runs.
type host struct {
	b       *broker.Broker
	mu      sync.Mutex
	entries []*hosted
	subs    []*nats.Subscription
	stopped chan string
	obs     *observers // metrics, traces, web view (nil: none)
	// member is this process's id in the deployment ("" when it is none);
	// waiting the sessions it lists as waiting for a member, with the
	// subscriptions that answer explain for them.
	member   string
	waiting  []SessionInfo
	waitSubs map[string]*nats.Subscription
}

// running is how many sessions the host runs (not stopped, not completed).
func (h *host) running() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, e := range h.entries {
		if e.stopped {
			continue
		}
		select {
		case <-e.s.Done():
		default:
			n++
		}
	}
	return n
}

type hosted struct {
	s       *session.Session
	info    SessionInfo
	stopped bool
	forget  func()               // leaves the metrics and the web view's running list
	subs    []*nats.Subscription // its stop and edit requests
}

func (h *host) add(s *session.Session, g *graph.Graph, file string) error {
	e := &hosted{s: s, info: SessionInfo{ID: s.ID(), Graph: g.Name, File: file, Status: "running",
		Started: time.Now().UTC().Format(time.RFC3339), Member: h.member}}
	e.forget = h.obs.add(s, file)
	h.mu.Lock()
	h.entries = append(h.entries, e)
	h.mu.Unlock()
	sub, err := h.b.Conn().Subscribe(broker.Control(s.ID(), "stop"), func(m *nats.Msg) {
		if broker.ServerReply(m) {
			return // not a request (docs/security.md)
		}
		// The operator's stop is recorded (who, when): no resume, serve
		// --all or takeover runs the session again on its own.
		var req struct {
			By string `json:"by"`
		}
		_ = json.Unmarshal(m.Data, &req)
		// Reply before serve may exit: the last stop ends the process.
		h.stopOne(e, stopperName(req.By), func(err error) {
			if err != nil {
				data, _ := json.Marshal(map[string]string{"status": "stopped", "error": err.Error()})
				_ = broker.Respond(m, data)
				return
			}
			_ = broker.Respond(m, []byte(`{"status":"stopped"}`))
		})
	})
	if err != nil {
		return err
	}
	edit, err := h.b.Conn().Subscribe(broker.Control(s.ID(), "edit"), func(m *nats.Msg) {
		if broker.ServerReply(m) {
			return // not a request (docs/security.md)
		}
		rep := serveEdit(s, m)
		if rep.Version > 0 {
			h.mu.Lock()
			e.info.File = rep.File
			h.mu.Unlock()
		}
		data, _ := json.Marshal(rep)
		_ = broker.Respond(m, data)
	})
	if err != nil {
		_ = sub.Unsubscribe()
		return err
	}
	h.mu.Lock()
	h.subs = append(h.subs, sub, edit)
	e.subs = []*nats.Subscription{sub, edit}
	h.mu.Unlock()
	return nil
}

// has reports whether the host serves session id.
func (h *host) has(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range h.entries {
		if e.info.ID == id {
			return true
		}
	}
	return false
}

// listen answers `switchyard sessions`.
func (h *host) listen() error {
	sub, err := h.b.Conn().Subscribe(SessionsSubject, func(m *nats.Msg) {
		h.mu.Lock()
		list := make([]SessionInfo, 0, len(h.entries))
		for _, e := range h.entries {
			info := e.info
			info.Version = e.s.Version()
			if g := e.s.System().Graph(); g != nil {
				for _, n := range g.Nodes {
					info.Nodes = append(info.Nodes, n.ID)
				}
			}
			list = append(list, info)
		}
		list = append(list, h.waiting...)
		h.mu.Unlock()
		data, _ := json.Marshal(list)
		_ = broker.Respond(m, data)
	})
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.subs = append(h.subs, sub)
	h.mu.Unlock()
	return h.b.Conn().Flush()
}

// stopOne stops a session, calls replied, then tells serve.
func (h *host) stopOne(e *hosted, by string, replied func(error)) {
	h.mu.Lock()
	if e.stopped {
		h.mu.Unlock()
		replied(nil)
		return
	}
	e.stopped = true
	e.info.Status = "stopped"
	h.mu.Unlock()
	err := e.s.End(by)
	e.forget()
	replied(err)
	h.stopped <- e.info.ID
}

// stopperName is who a stop request says it comes from, as recorded:
// printable, at most 64 bytes ("" when it says nothing usable).
func stopperName(by string) string {
	if len(by) > 64 {
		by = by[:64]
	}
	for _, r := range by {
		if r < 0x20 || r == 0x7f || !utf8.ValidRune(r) || r == utf8.RuneError {
			return ""
		}
	}
	return by
}

func (h *host) stopAll() {
	h.mu.Lock()
	subs := h.subs
	h.subs = nil
	for _, sub := range h.waitSubs {
		subs = append(subs, sub)
	}
	h.waitSubs, h.waiting = nil, nil
	entries := append([]*hosted(nil), h.entries...)
	h.mu.Unlock()
	for _, s := range subs {
		_ = s.Unsubscribe()
	}
	for _, e := range entries {
		h.mu.Lock()
		done := e.stopped
		e.stopped = true
		h.mu.Unlock()
		if !done {
			e.s.Stop()
			e.forget()
		}
	}
}

// parsePoolTokens reads --pool-token's POOL=TOKEN values (nil for none).
func parsePoolTokens(list []string) (map[string]string, error) {
	if len(list) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, v := range list {
		name, tok, ok := strings.Cut(v, "=")
		if !ok || tok == "" {
			return nil, fmt.Errorf("%q: want POOL=TOKEN", redactToken(v))
		}
		if err := pool.CheckName(name); err != nil {
			return nil, err
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("pool %s given twice", name)
		}
		out[name] = tok
	}
	return out, nil
}

// redactToken shows what a malformed --pool-token value starts with, not
// the secret it may hold.
func redactToken(v string) string {
	if len(v) > 4 {
		return v[:4] + "..."
	}
	return v
}

// splitList is a comma-separated environment variable's values.
func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
