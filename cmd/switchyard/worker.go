package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/pool"
	"github.com/switchyard/switchyard/session"
)

func init() { subcommands = append(subcommands, newWorkerCmd) }

type workerFlags struct {
	conn        connFlags
	pool        string
	concurrency int
	ackWait     time.Duration
	replicas    int
	sessions    bool
	labels      string
	logs        string
	workdir     string
	provider    string
	mock        string
	roles       string
	prices      string
	inboxPrefix string
}

func newWorkerCmd() *cobra.Command {
	f := &workerFlags{}
	cmd := &cobra.Command{
		Use:   "worker --nats URL [--pool NAME] [--concurrency N]",
		Short: "Run the work of pool nodes (pool=NAME) for the sessions of a NATS server or cluster",
		Long: `worker pulls the jobs of one pool from the work-queue stream SY_WORK of the
server at --nats and runs each with the node's built-in handler (agents, tools...):
the firings of every node with pool=NAME, whichever process owns their session.
The outcome goes back to the session's owner, which commits and routes it.
While a job runs the worker sends in-progress acks; a worker that dies leaves
its job to another after --ack-wait, with the same attempt id (the owner keeps
the first outcome). Workers of other languages: docs/workers.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runWorker(cmd.Context(), f, cmd.ErrOrStderr())
		},
	}
	f.conn.add(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.pool, "pool", pool.DefaultPool, "the pool whose jobs to run (a node's pool attribute)")
	fl.StringVar(&f.inboxPrefix, "inbox-prefix", os.Getenv("SWITCHYARD_INBOX_PREFIX"), "reply inbox prefix of the worker's connection, for an external server that gives each pool's user its own (docs/security.md; default: a private _INBOX.<name>)")
	fl.IntVar(&f.concurrency, "concurrency", 1, "jobs run at once")
	fl.IntVar(&f.replicas, "replicas", 1, "copies JetStream keeps of the work stream if this worker makes it (3 on a cluster, as serve --replicas)")
	fl.DurationVar(&f.ackWait, "ack-wait", pool.DefaultAckWait, "how long a job may go unacknowledged before another worker gets it (the pool's consumer; in-progress acks every third of it)")
	fl.StringVar(&f.workdir, "workdir", "", "where tools and agents work (default: the current directory)")
	fl.BoolVar(&f.sessions, "sessions", false, "also run sessions: be a member of the deployment, as serve --all --takeover (placement gives it its share; needs the admin credential)")
	fl.StringVar(&f.labels, "labels", "", "with --sessions: this member's labels, k=v,... (a graph's placement attribute asks for them)")
	fl.StringVar(&f.logs, "logs", "", "with --sessions: root of the sessions' run directories (default .switchyard/sessions)")
	fl.StringVar(&f.provider, "provider", "mock", "default agent provider")
	fl.StringVar(&f.mock, "mock", "", "JSON script for the mock provider")
	fl.StringVar(&f.roles, "roles", "", "directory of agent roles (ROLE.md), added to the built-in ones")
	fl.StringVar(&f.prices, "prices", "", "JSON price table (per million tokens), added to the built-in one")
	return cmd
}

func runWorker(ctx context.Context, f *workerFlags, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := pool.CheckName(f.pool); err != nil {
		return usageErr(fmt.Errorf("--pool: %w", err))
	}
	if f.replicas < 1 || f.replicas > 5 {
		return usageErr(fmt.Errorf("--replicas %d: want 1 to 5", f.replicas))
	}
	if f.concurrency < 1 {
		return usageErr(fmt.Errorf("--concurrency %d: want 1 or more", f.concurrency))
	}
	if f.ackWait < 300*time.Millisecond {
		return usageErr(fmt.Errorf("--ack-wait %s: want 300ms or more", f.ackWait))
	}
	if _, err := session.ParseLabels(f.labels); err != nil {
		return usageErr(fmt.Errorf("--labels: %w", err))
	}
	if (f.labels != "" || f.logs != "") && !f.sessions {
		return usageErr(errors.New("--labels and --logs are those of a worker that runs sessions: add --sessions"))
	}
	providers, err := newProviders(providerFiles{mock: f.mock, roles: f.roles, prices: f.prices})
	if err != nil {
		return usageErr(err)
	}
	reg := nodes.NewRegistry()
	if err := nodes.RegisterBuiltins(reg, nodes.Deps{Providers: providers.lookup, DefaultProvider: f.provider}); err != nil {
		return err
	}
	// A worker is long-lived: it reconnects for as long as its cluster is
	// away (a command's connection gives up after nats.go's 60 tries).
	opts := []nats.Option{nats.MaxReconnects(-1)}
	if f.inboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(f.inboxPrefix))
	}
	nc, err := f.conn.connect(opts...)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	workdir := f.workdir
	if workdir == "" {
		if workdir, err = os.Getwd(); err != nil {
			return &exitError{code: 1, err: err}
		}
	}
	ctx, stop := interruptible(ctx)
	defer stop()
	w := &pool.Worker{NC: nc, JS: js, Pool: f.pool, Concurrency: f.concurrency, AckWait: f.ackWait, Replicas: f.replicas,
		Registry: reg, WorkDir: workdir, Log: slog.New(slog.NewTextHandler(stderr, nil))}
	fmt.Fprintf(stderr, "worker: pool %s, %d at once, on %s\n", f.pool, f.concurrency, f.conn.url)
	// With --sessions the worker is also a member of the deployment: the
	// sessions placement gives it run here (serve --all --takeover).
	ctx, cancel := context.WithCancel(ctx) // the first of the two to fail ends the other
	defer cancel()
	// A credential that may not serve the pool (another pool's token) is
	// refused the pool's consumer: say so and stop, rather than wait for a
	// consumer it can never read.
	var refused error
	watchDone := make(chan struct{})
	go func() { // owned by runWorker: ends with ctx
		defer close(watchDone)
		info := "$JS.API.CONSUMER.INFO." + pool.Stream + "." + pool.ConsumerName(f.pool)
		for {
			select {
			case err := <-f.conn.denied:
				if strings.Contains(err.Error(), info) {
					refused = fmt.Errorf("permission denied: this credential may not serve pool %s's jobs (%v)", f.pool, err)
					cancel()
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	defer func() { cancel(); <-watchDone }()
	served := make(chan error, 1)
	if f.sessions {
		sf := &serveFlags{nats: f.conn.url, token: f.conn.token, user: f.conn.user, password: f.conn.password,
			durable: true, resume: true, all: true, takeover: true, labels: f.labels, logs: f.logs,
			workdir: f.workdir, provider: f.provider, mock: f.mock, roles: f.roles, prices: f.prices,
			replicas: f.replicas, retain: session.DefaultRetain, settle: session.DefaultSettle}
		go func() { // ends with ctx
			err := serve(ctx, sf, nil, io.Discard, stderr)
			if err != nil {
				cancel()
			}
			served <- err
		}()
	} else {
		served <- nil
	}
	err = w.Run(ctx)
	cancel()
	serr := <-served
	<-watchDone
	if refused != nil {
		return &exitError{code: 1, err: refused}
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return &exitError{code: 1, err: err}
	}
	return serr
}
