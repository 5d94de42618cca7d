package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchyard/switchyard/broker"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

func init() {
	subcommands = append(subcommands, newPubCmd, newAnswerCmd, newStopCmd, newSessionsCmd)
}

func newPubCmd() *cobra.Command {
	c := &connFlags{}
	var edge, structured string
	var files []string
	var retryFor time.Duration
	cmd := &cobra.Command{
		Use:   "pub SESSION NODE MESSAGE",
		Short: "Publish a message to a node of a running session (its inbox, or an edge with --edge)",
		Long: `Publish a message to a node of a running session: its inbox, or an edge
with --edge FROM:TO. The serving session confirms it takes the envelope; a
node or edge the session does not have is refused with the reason (exit 1,
an envelope.rejected event, the envelope on sy.SESSION.dlq), and a session
nobody serves on --nats is an error ("no session S on URL") once nothing
answered for 15s (or --retry-for): a session being taken over by another
process answers again within that time.`,
		Args: sessionNodeArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			env := &pb.Envelope{Id: nuid.Next(), SessionId: args[0], Kind: "handoff", ToNode: args[1],
				CreatedAt: timestamppb.Now(), Payload: &pb.Payload{Message: args[2]}}
			subject := broker.NodeIn(args[0], args[1])
			if edge != "" {
				from, to, ok := strings.Cut(edge, ":")
				if !ok || !broker.ValidToken(from) || !broker.ValidToken(to) {
					return usageErr(fmt.Errorf("--edge %q: want FROM:TO", edge))
				}
				env.FromNode, env.EdgeId = from, from+"."+to
				subject = broker.Edge(args[0], env.EdgeId)
			}
			if structured != "" {
				var m map[string]any
				if err := json.Unmarshal([]byte(structured), &m); err != nil {
					return usageErr(fmt.Errorf("--structured: %v", err))
				}
				st, err := structpb.NewStruct(m)
				if err != nil {
					return usageErr(fmt.Errorf("--structured: %v", err))
				}
				env.Payload.Structured = st
			}
			nc, err := c.connect()
			if err != nil {
				return err
			}
			defer nc.Close()
			for _, f := range files {
				a, err := uploadArtifact(cmd.Context(), nc, args[0], env.Id, f)
				if err != nil {
					return err
				}
				env.Payload.Artifacts = append(env.Payload.Artifacts, a)
			}
			data, _ := proto.Marshal(env)
			msg := nats.NewMsg(subject)
			msg.Data = data
			msg.Header.Set(nats.MsgIdHdr, env.Id)
			d, err := deliver(nc, msg, c.timeout, retryFor, func() {
				fmt.Fprintf(cmd.ErrOrStderr(), "nothing answers on %s yet (no process serves session %s now?): publishing again for up to %s\n",
					subject, args[0], min(nobodyFor, retryFor))
			})
			var refused *errRefused
			switch {
			case errors.Is(err, errNobody):
				return &exitError{code: 1, err: fmt.Errorf("no session %s on %s (nothing answered on %s for %s: no process serves the session, and no stream stores the subject — a durable session's stream stores a small graph's inboxes and edges, and nothing else)", args[0], c.url, subject, min(nobodyFor, retryFor))}
			case errors.As(err, &refused):
				return &exitError{code: 1, err: refused}
			case err != nil:
				return &exitError{code: 1, err: err}
			}
			if d.Stream != "" && !d.Served {
				fmt.Fprintf(cmd.ErrOrStderr(), "no process serves session %s now: the envelope is stored and is delivered when the session runs again\n", args[0])
			}
			if d.Stream != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "published %s on %s (stored: %s #%d)\n", env.Id, subject, d.Stream, d.Seq)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "published %s on %s\n", env.Id, subject)
			return nil
		},
	}
	c.add(cmd)
	cmd.Flags().StringVar(&edge, "edge", "", "publish on the edge FROM:TO instead of the node's inbox")
	cmd.Flags().StringVar(&structured, "structured", "", "a JSON object for payload.structured")
	cmd.Flags().StringArrayVar(&files, "file", nil, "attach a file as an artifact (repeatable)")
	cmd.Flags().DurationVar(&retryFor, "retry-for", broker.RideThrough, "publish again (same id) until the session's stream acknowledges, for this long")
	return cmd
}

// uploadArtifact stores a local file in the session's object store, as
// inbox/<envelope id>/<file name>, and returns its reference.
func uploadArtifact(ctx context.Context, nc *nats.Conn, session, envID, path string) (*pb.Artifact, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, usageErr(fmt.Errorf("--file: %w", err))
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, &exitError{code: 1, err: err}
	}
	defer js.CleanupPublisher() // its reply subscription and status listener
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// A publish the server refuses is reported asynchronously: watch for
	// it rather than wait for the request to time out.
	denied := make(chan error, 1)
	nc.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) {
			select {
			case denied <- err:
			default:
			}
		}
	})
	type result struct {
		a   *pb.Artifact
		err error
	}
	done := make(chan result, 1)
	go func() { // ends with ctx at the latest
		a, err := broker.PutArtifact(ctx, js, session, "inbox/"+envID+"/"+filepath.Base(path), "file", data, broker.FileStorage)
		done <- result{a, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, &exitError{code: 1, err: r.err}
		}
		return r.a, nil
	case err := <-denied:
		cancel()
		<-done
		return nil, &exitError{code: 1, err: fmt.Errorf("%w: uploading a file to the session's object store needs the admin credential", err)}
	}
}

func newAnswerCmd() *cobra.Command {
	c := &connFlags{}
	var by string
	cmd := &cobra.Command{
		Use:   "answer SESSION NODE CHOICE",
		Short: "Answer a human gate of a running session (an accelerator key, a label or a target)",
		Long: `Answer a human gate of a running session with one of its options: an
accelerator key, a label or a target node id. The session checks the answer:
one that matches no option (or names a node that is not a human gate) is
refused with the list of options and exit code 2, and the question stays open.
An answer sent before the question is asked is kept for it.`,
		Args: sessionNodeArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			nc, err := c.connect()
			if err != nil {
				return err
			}
			defer nc.Close()
			if by == "" {
				by = os.Getenv("USER")
			}
			// A request: the session checks the answer against the gate's
			// options and replies; a refusal is exit code 2.
			data, _ := json.Marshal(session.AnswerMessage{Node: args[1], Choice: args[2], By: by})
			msg, err := requestOrDenied(nc, c.denied, broker.Control(args[0], "answer"), data, c.timeout)
			if errors.Is(err, errPermissionDenied) {
				return &exitError{code: 1, err: err}
			}
			if err != nil {
				if errors.Is(err, nats.ErrNoResponders) {
					return &exitError{code: 1, err: fmt.Errorf("no session %s on %s", args[0], c.url)}
				}
				return &exitError{code: 1, err: fmt.Errorf("no answer from session %s: %w (is it running?)", args[0], err)}
			}
			var r session.AnswerReply
			if err := json.Unmarshal(msg.Data, &r); err != nil {
				return &exitError{code: 1, err: fmt.Errorf("bad reply from session %s: %v", args[0], err)}
			}
			if !r.OK {
				return &exitError{code: 2, err: errors.New(r.Error)}
			}
			if r.Queued {
				fmt.Fprintf(cmd.OutOrStdout(), "answered %s with %q (kept until its question is asked)\n", args[1], args[2])
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "answered %s with %q\n", args[1], args[2])
			return nil
		},
	}
	c.add(cmd)
	cmd.Flags().StringVar(&by, "by", "", "who answers (default $USER)")
	return cmd
}

func newStopCmd() *cobra.Command {
	c := &connFlags{}
	var by string
	cmd := &cobra.Command{
		Use:   "stop SESSION",
		Short: "Stop a served session (running handlers are cancelled, the checkpoint is kept; a durable one is recorded as stopped)",
		Args:  sessionArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if by == "" {
				by = os.Getenv("USER")
			}
			rep, err := request(c, broker.Control(args[0], "stop"), map[string]string{"by": by})
			if err != nil {
				return err
			}
			var r struct {
				Error string `json:"error"`
			}
			if json.Unmarshal(rep, &r) == nil && r.Error != "" {
				return &exitError{code: 1, err: fmt.Errorf("session %s stopped, but its stop was not recorded (a standby or serve --all may resume it): %s", args[0], r.Error)}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "stopped session %s\n", args[0])
			return nil
		},
	}
	c.add(cmd)
	cmd.Flags().StringVar(&by, "by", "", "who stops it, as recorded (default $USER)")
	return cmd
}

func newSessionsCmd() *cobra.Command {
	c := &connFlags{}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "sessions",
		Short: "List the sessions served on a NATS server",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			nc, err := c.connect()
			if err != nil {
				return err
			}
			defer nc.Close()
			// Every serving process answers; collect until the timeout.
			all, err := listSessions(nc, c.denied, c.timeout)
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			if asJSON {
				data, _ := json.MarshalIndent(all, "", "  ")
				fmt.Fprintln(cmd.OutOrStdout(), string(data))
				return nil
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "SESSION\tGRAPH\tVERSION\tSTATUS\tSTARTED\tFILE")
			for _, s := range all {
				status := s.Status
				if s.Waiting != "" {
					status += " (" + s.Waiting + ")"
				}
				fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\n", s.ID, s.Graph, s.Version, status, s.Started, s.File)
			}
			return w.Flush()
		},
	}
	c.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the list as JSON")
	cmd.Flags().Lookup("timeout").DefValue = "5s"
	return cmd
}
