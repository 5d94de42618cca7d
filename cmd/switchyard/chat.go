package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchyard/switchyard/actors"
	"github.com/switchyard/switchyard/broker"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

func init() { subcommands = append(subcommands, newChatCmd) }

func newChatCmd() *cobra.Command {
	c := &connFlags{}
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "chat SESSION NODE",
		Short: "Talk with an interactive agent node of a running session",
		Long: `chat sends each line you type to the node's inbox and prints the agent's reply.
The node must have mode="interactive". Type /done (or end the input) to finish the
conversation: the node then completes and the session goes on from it.`,
		Args: sessionArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			nc, err := c.connect()
			if err != nil {
				return err
			}
			defer nc.Close()
			return chat(cmd.Context(), nc, args[0], args[1], wait, cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
	c.add(cmd)
	cmd.Flags().DurationVar(&wait, "wait", 30*time.Minute, "how long to wait for each reply")
	return cmd
}

// chatEvent is what the chat loop learns from the session's events.
type chatEvent struct {
	kind, inReplyTo, text, cont, status string
}

// chat runs the conversation: a line out, the reply back, until /done
// (or the end of the input) and the node's completion.
func chat(ctx context.Context, nc *nats.Conn, sess, node string, wait time.Duration, in io.Reader, out io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	events := make(chan chatEvent, 64)
	quit := make(chan struct{})
	defer close(quit)
	handler := func(m *nats.Msg) {
		ev := &pb.Event{}
		if proto.Unmarshal(m.Data, ev) != nil || ev.GetNode() != node {
			return
		}
		ce := chatEvent{kind: ev.GetKind(), text: ev.GetMessage(), status: ev.GetStatus()}
		for _, kv := range ev.GetAttrs() {
			switch kv.GetKey() {
			case "in_reply_to":
				ce.inReplyTo = kv.GetValue()
			case "continue":
				ce.cont = kv.GetValue()
			}
		}
		select {
		case events <- ce:
		case <-quit:
		}
	}
	for _, kind := range []string{"agent.reply", "node.completed"} {
		sub, err := nc.Subscribe(broker.Event(sess, kind), handler)
		if err != nil {
			return &exitError{code: 1, err: err}
		}
		defer func() { _ = sub.Unsubscribe() }()
	}
	if err := nc.Flush(); err != nil {
		return &exitError{code: 1, err: err}
	}
	fmt.Fprintf(out, "chatting with %s in %s; /done to finish\n", node, sess)
	lines := bufio.NewScanner(in)
	lines.Buffer(make([]byte, 64<<10), 1<<20)
	for {
		fmt.Fprint(out, "> ")
		text := "/done"
		if lines.Scan() {
			text = strings.TrimSpace(lines.Text())
		}
		if text == "" {
			continue
		}
		id, err := sendChat(nc, sess, node, text)
		if err != nil {
			return &exitError{code: 1, err: err}
		}
		done, err := awaitReply(ctx, events, id, wait, out)
		if err != nil || done {
			return err
		}
		if text == "/done" {
			return nil
		}
	}
}

// sendChat publishes one message to the node's inbox and returns its id.
func sendChat(nc *nats.Conn, sess, node, text string) (string, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	id := sess + ".chat." + hex.EncodeToString(b[:])
	env := &pb.Envelope{Id: id, SessionId: sess, Kind: actors.KindEvent, ToNode: node,
		CreatedAt: timestamppb.Now(), Payload: &pb.Payload{Message: text}}
	data, err := proto.Marshal(env)
	if err != nil {
		return "", err
	}
	if err := nc.Publish(broker.NodeIn(sess, node), data); err != nil {
		return "", err
	}
	if err := nc.Flush(); err != nil {
		return "", err
	}
	if err := nc.LastError(); err != nil {
		return "", err
	}
	return id, nil
}

// awaitReply prints the reply to message id; done is true when the node
// completed (the conversation is over).
func awaitReply(ctx context.Context, events <-chan chatEvent, id string, wait time.Duration, out io.Writer) (done bool, err error) {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	replied := false
	for {
		select {
		case ev := <-events:
			switch {
			case ev.kind == "agent.reply" && ev.inReplyTo == id:
				fmt.Fprintf(out, "%s\n", ev.text)
				replied = true
			case ev.kind == "node.completed" && ev.cont == "":
				if !replied && ev.text != "" {
					fmt.Fprintf(out, "%s\n", ev.text)
				}
				fmt.Fprintf(out, "(the conversation is over: %s)\n", ev.status)
				return true, nil
			case ev.kind == "node.completed" && replied:
				return false, nil
			}
		case <-timer.C:
			return false, &exitError{code: 1, err: errors.New("no reply within " + wait.String() + " (is the session running, and the node interactive?)")}
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}
