package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/actors"
	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/graph"
)

func init() { subcommands = append(subcommands, newExplainCmd, newTriggerCmd) }

// connFlags are how the commands that talk to a running session reach it.
type connFlags struct {
	url, token, user, password string
	tlsCA                      string
	timeout                    time.Duration
	denied                     chan error // set by connect
}

func (c *connFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&c.url, "nats", os.Getenv("SWITCHYARD_NATS"), "NATS URL of the server the session runs on (env SWITCHYARD_NATS)")
	cmd.Flags().StringVar(&c.token, "token", os.Getenv("SWITCHYARD_TOKEN"), "credential token (env SWITCHYARD_TOKEN)")
	cmd.Flags().StringVar(&c.user, "user", os.Getenv("SWITCHYARD_USER"), "user name (env SWITCHYARD_USER)")
	cmd.Flags().StringVar(&c.password, "password", os.Getenv("SWITCHYARD_PASSWORD"), "password (env SWITCHYARD_PASSWORD)")
	cmd.Flags().StringVar(&c.tlsCA, "tls-ca", os.Getenv("SWITCHYARD_TLS_CA"), "PEM file of the CA that signed the server's TLS certificate (env SWITCHYARD_TLS_CA)")
	cmd.Flags().DurationVar(&c.timeout, "timeout", 5*time.Second, "how long to wait for the session to answer")
}

func (c *connFlags) connect(extra ...nats.Option) (*nats.Conn, error) {
	nc, denied, err := c.dial(extra...)
	if err != nil {
		return nil, err
	}
	c.denied = denied
	return nc, nil
}

// dial connects with the flags' credential; the channel receives the
// permissions violations the server reports for this connection.
func (c *connFlags) dial(extra ...nats.Option) (*nats.Conn, chan error, error) {
	if c.url == "" {
		return nil, nil, usageErr(errors.New("--nats URL is required: the session's server (serve --listen, or a NATS cluster)"))
	}
	if c.timeout <= 0 {
		return nil, nil, usageErr(fmt.Errorf("--timeout %s: want a positive duration", c.timeout))
	}
	// A private reply inbox: with an outside credential no other client
	// may read this connection's replies (docs/security.md).
	opts := broker.PrivateInbox("switchyard_cli_")
	if c.tlsCA != "" {
		opts = append(opts, nats.RootCAs(c.tlsCA))
	}
	switch {
	case c.token != "":
		opts = append(opts, nats.Token(c.token))
	case c.user != "":
		opts = append(opts, nats.UserInfo(c.user, c.password))
	}
	denied := make(chan error, 1)
	opts = append(opts, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if isPermissionViolation(err) {
			select {
			case denied <- err:
			default:
			}
		}
	}))
	opts = append(opts, extra...)
	nc, err := nats.Connect(c.url, opts...)
	if err != nil {
		return nil, nil, &exitError{code: 1, err: fmt.Errorf("connect %s: %w", c.url, err)}
	}
	return nc, denied, nil
}

// errPermissionDenied is what a command says when its credential may not
// do what it asks (an outside token where the admin one is needed).
var errPermissionDenied = errors.New("permission denied: needs the admin credential (serve's --admin-token)")

func isPermissionViolation(err error) bool {
	return errors.Is(err, nats.ErrPermissionViolation) || strings.Contains(strings.ToLower(fmt.Sprint(err)), "permissions violation")
}

// requestOrDenied is a request that fails at once with errPermissionDenied
// when the server refuses the credential its publish or its reply.
func requestOrDenied(nc *nats.Conn, denied <-chan error, subject string, data []byte, timeout time.Duration) (*nats.Msg, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var refused atomic.Bool
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-denied:
			refused.Store(true)
			cancel()
		case <-stop:
		}
	}()
	// A session between two owners (a takeover, a move to another member)
	// has nobody on its control subjects for a moment: a request nobody
	// listens to is sent again for up to ownerGap.
	gap := time.Now().Add(min(ownerGap, timeout))
	for {
		msg, err := nc.RequestWithContext(ctx, subject, data)
		if err != nil && (refused.Load() || isPermissionViolation(err)) {
			return nil, errPermissionDenied
		}
		if !errors.Is(err, nats.ErrNoResponders) || time.Now().After(gap) {
			return msg, err
		}
		select {
		case <-ctx.Done():
			return msg, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ownerGap is how long a control request nobody answers is sent again:
// longer than a session takes to move between members (0.2–0.8 s,
// docs/cluster.md#rebalancing).
const ownerGap = 2 * time.Second

func request(c *connFlags, subject string, payload any) ([]byte, error) {
	nc, err := c.connect()
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	data, _ := json.Marshal(payload)
	msg, err := requestOrDenied(nc, c.denied, subject, data, c.timeout)
	if errors.Is(err, errPermissionDenied) {
		return nil, &exitError{code: 1, err: err}
	}
	if err != nil {
		return nil, &exitError{code: 1, err: fmt.Errorf("no answer on %s: %w (is the session running?)", subject, err)}
	}
	return msg.Data, nil
}

func sessionArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageErr(fmt.Errorf("%s: want %d arguments, got %d", cmd.Name(), n, len(args)))
		}
		return checkSessionID("session", args[0])
	}
}

// sessionNodeArgs is sessionArgs for commands whose second argument is a
// node id.
func sessionNodeArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := sessionArgs(n)(cmd, args); err != nil {
			return err
		}
		if !graph.IsIdentifier(args[1]) {
			return usageErr(fmt.Errorf("node %q: invalid node id ([A-Za-z_][A-Za-z0-9_]*)", args[1]))
		}
		return nil
	}
}

func newExplainCmd() *cobra.Command {
	c := &connFlags{}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "explain SESSION NODE",
		Short: "Say why a node of a running session is not running",
		Args:  sessionNodeArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := request(c, broker.Control(args[0], "explain"), actors.ExplainRequest{Node: args[1]})
			if err != nil {
				return err
			}
			return printExplain(cmd.OutOrStdout(), data, asJSON)
		},
	}
	c.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the reply as JSON")
	return cmd
}

func printExplain(w io.Writer, data []byte, asJSON bool) error {
	var r actors.ExplainReply
	if err := json.Unmarshal(data, &r); err != nil {
		return &exitError{code: 1, err: fmt.Errorf("bad reply: %w", err)}
	}
	if asJSON {
		_, err := w.Write(append(data, '\n'))
		return err
	}
	if r.Error != "" {
		return &exitError{code: 1, err: errors.New(r.Error)}
	}
	fmt.Fprintln(w, r.Explain)
	fmt.Fprintln(w)
	for _, st := range r.States {
		line := fmt.Sprintf("  %-24s %-8s", st.Node, st.State)
		if st.Reason != "" {
			line += "  " + st.Reason
		}
		fmt.Fprintln(w, line)
	}
	return nil
}

func newTriggerCmd() *cobra.Command {
	c := &connFlags{}
	var message string
	cmd := &cobra.Command{
		Use:   "trigger SESSION NODE",
		Short: "Fire a node of a running session now (manual triggers)",
		Args:  sessionNodeArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := request(c, broker.Control(args[0], "trigger"), actors.TriggerRequest{Node: args[1], Message: message})
			if err != nil {
				return err
			}
			var r map[string]string
			_ = json.Unmarshal(data, &r)
			if r["error"] != "" {
				return &exitError{code: 1, err: errors.New(r["error"])}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "triggered %s in session %s\n", args[1], args[0])
			return nil
		},
	}
	c.add(cmd)
	cmd.Flags().StringVar(&message, "message", "", "a message the node receives with the trigger")
	return cmd
}
