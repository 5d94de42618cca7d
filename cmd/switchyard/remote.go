package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
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
}

func (c *connFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&c.url, "nats", os.Getenv("SWITCHYARD_NATS"), "NATS URL of the server the session runs on (env SWITCHYARD_NATS)")
	cmd.Flags().StringVar(&c.token, "token", os.Getenv("SWITCHYARD_TOKEN"), "credential token (env SWITCHYARD_TOKEN)")
	cmd.Flags().StringVar(&c.user, "user", os.Getenv("SWITCHYARD_USER"), "user name (env SWITCHYARD_USER)")
	cmd.Flags().StringVar(&c.password, "password", os.Getenv("SWITCHYARD_PASSWORD"), "password (env SWITCHYARD_PASSWORD)")
	cmd.Flags().StringVar(&c.tlsCA, "tls-ca", os.Getenv("SWITCHYARD_TLS_CA"), "PEM file of the CA that signed the server's TLS certificate (env SWITCHYARD_TLS_CA)")
	cmd.Flags().DurationVar(&c.timeout, "timeout", 5*time.Second, "how long to wait for the session to answer")
}

func (c *connFlags) connect() (*nats.Conn, error) {
	if c.url == "" {
		return nil, usageErr(errors.New("--nats URL is required: the session's server (serve --listen, or a NATS cluster)"))
	}
	if c.timeout <= 0 {
		return nil, usageErr(fmt.Errorf("--timeout %s: want a positive duration", c.timeout))
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
	nc, err := nats.Connect(c.url, opts...)
	if err != nil {
		return nil, &exitError{code: 1, err: fmt.Errorf("connect %s: %w", c.url, err)}
	}
	return nc, nil
}

func request(c *connFlags, subject string, payload any) ([]byte, error) {
	nc, err := c.connect()
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	data, _ := json.Marshal(payload)
	msg, err := nc.Request(subject, data, c.timeout)
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
