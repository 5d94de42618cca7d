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
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchyard/switchyard/actors"
	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/nodes"
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
		Args: sessionNodeArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if wait <= 0 {
				return usageErr(fmt.Errorf("--wait %s: want a positive duration", wait))
			}
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
		if proto.Unmarshal(m.Data, ev) != nil || ev.GetNode() != node ||
			(ev.GetKind() != "agent.reply" && ev.GetKind() != "node.completed") {
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
	// One subscription, so the reply and the completion arrive in the
	// order the session emitted them (two subscriptions are two
	// goroutines: the completion could overtake the reply).
	sub, err := nc.Subscribe(broker.AllEvents(sess), handler)
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.Flush(); err != nil {
		return &exitError{code: 1, err: err}
	}
	fmt.Fprintf(out, "chatting with %s in %s; /done to finish\n", node, sess)
	lines := bufio.NewScanner(in)
	lines.Buffer(make([]byte, 64<<10), 1<<20)
	for {
		fmt.Fprint(out, "> ")
		text := nodes.DoneCommand
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
		if text == nodes.DoneCommand {
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

// hasInteractive reports whether g has an agent node in interactive mode.
func hasInteractive(g *graph.Graph) bool {
	for _, n := range g.Nodes {
		if n.Mode() == nodes.ModeInteractive {
			return true
		}
	}
	return false
}

// conversation lets `switchyard run` hold the conversations of its
// interactive nodes on the command's input: when a node waits for its next
// message, the next line goes to it (the end of the input sends /done).
type conversation struct {
	nc   *nats.Conn
	in   io.Reader
	out  io.Writer
	mu   sync.Mutex
	wait [][2]string   // session, node: the nodes waiting, in order
	wake chan struct{} // a node started waiting
}

func newConversation(nc *nats.Conn, in io.Reader, out io.Writer) *conversation {
	return &conversation{nc: nc, in: in, out: out, wake: make(chan struct{}, 1)}
}

// next takes the first waiting node, if any.
func (c *conversation) next() ([2]string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.wait) == 0 {
		return [2]string{}, false
	}
	w := c.wait[0]
	c.wait = c.wait[1:]
	return w, true
}

// observe notes the nodes that wait for a message.
func (c *conversation) observe(ev *pb.Event) {
	if ev.GetKind() != "node.completed" {
		return
	}
	for _, kv := range ev.GetAttrs() {
		if kv.GetKey() == "continue" && kv.GetValue() == string(nodes.ContinueWait) {
			c.mu.Lock()
			c.wait = append(c.wait, [2]string{ev.GetSessionId(), ev.GetNode()})
			c.mu.Unlock()
			select {
			case c.wake <- struct{}{}:
			default:
			}
		}
	}
}

// start answers waiting nodes until ctx ends; the returned channel closes
// then. The input is read by a goroutine of its own, from the first wait:
// it ends at the end of the input or with ctx (unless a terminal read
// blocks it, which ends with the process).
func (c *conversation) start(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		var lines chan string
		for {
			w, ok := c.next()
			if !ok {
				select {
				case <-c.wake:
					continue
				case <-ctx.Done():
					return
				}
			}
			if lines == nil {
				lines = make(chan string, 16)
				go readLines(ctx, c.in, lines)
			}
			fmt.Fprintf(c.out, "%s> ", w[1])
			text := nodes.DoneCommand
			select {
			case line, ok := <-lines:
				if ok {
					text = line
				}
			case <-ctx.Done():
				return
			}
			if _, err := sendChat(c.nc, w[0], w[1], text); err != nil {
				fmt.Fprintf(c.out, "\nchat: %v\n", err)
			}
		}
	}()
	return done
}

// readLines sends the non-empty lines of r until its end or ctx.
func readLines(ctx context.Context, r io.Reader, lines chan<- string) {
	defer close(lines)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		select {
		case lines <- text:
		case <-ctx.Done():
			return
		}
	}
}
