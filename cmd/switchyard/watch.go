package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard/switchyard/actors"
	"github.com/switchyard/switchyard/broker"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

func init() { subcommands = append(subcommands, newWatchCmd) }

func newWatchCmd() *cobra.Command {
	c := &connFlags{}
	var plain bool
	cmd := &cobra.Command{
		Use:   "watch SESSION",
		Short: "Watch a running session: node states, work in flight, budgets, last events",
		Long: `Watch follows a session's events. In a terminal it redraws a live view in place (node
states, handlers in flight, budgets, the last events); otherwise (or with --plain) it prints
one line per event. It starts with every node's state at once (asked of the session, as
explain does; a human gate waiting for its answer shows as waiting) and fails when the
session does not answer within --timeout (an unknown session, or one not running). It
ends when the session completes or stops, or on Ctrl-C.`,
		Args: sessionArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			nc, err := c.connect()
			if err != nil {
				return err
			}
			defer nc.Close()
			out := cmd.OutOrStdout()
			live := !plain && isTerminal(os.Stdout) && out == io.Writer(os.Stdout)
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return watch(ctx, nc, args[0], out, live, c.timeout)
		},
	}
	c.add(cmd)
	cmd.Flags().BoolVar(&plain, "plain", false, "print plain lines even in a terminal")
	return cmd
}

// watchView is what watch knows of a session.
type watchView struct {
	mu      sync.Mutex
	session string
	nodes   map[string]*nodeView
	budgets map[string]string
	last    []string
	usage   pb.Usage
	status  string
}

type nodeView struct {
	state, detail string
	runs          int
	usage         pb.Usage
}

func (v *watchView) node(id string) *nodeView {
	n := v.nodes[id]
	if n == nil {
		n = &nodeView{state: "idle"}
		v.nodes[id] = n
	}
	return n
}

// snapshot sets every node's state from the session's answer.
func (v *watchView) snapshot(states []actors.GateState) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, st := range states {
		n := v.node(st.Node)
		n.state, n.detail = st.State, st.Reason
	}
}

// apply updates the view with an event.
func (v *watchView) apply(ev *pb.Event) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if ev.Node != "" {
		n := v.node(ev.Node)
		switch ev.Kind {
		case "node.started":
			n.state, n.detail = "running", ""
		case "node.completed":
			n.state, n.detail = ev.Status, firstLine(ev.Message)
			n.runs++
			if u := ev.Usage; u != nil {
				for _, t := range []*pb.Usage{&v.usage, &n.usage} {
					t.InputTokens += u.InputTokens
					t.OutputTokens += u.OutputTokens
					t.Cost += u.Cost
				}
			}
		case "gate.waiting", "lock.waiting", "node.waiting":
			n.state, n.detail = "waiting", ev.Message
		case "human.question":
			n.state, n.detail = "waiting", "waiting for an answer: "+ev.Message
		case "human.answer", "node.retrying":
			n.state, n.detail = "running", ev.Message
		case "node.refused", "iterations.exceeded", "stall.detected":
			n.state, n.detail = "stopped", ev.Message
		case "budget.threshold", "budget.exceeded":
			v.budgets[ev.Node] = ev.Message
		}
	}
	switch ev.Kind {
	case "session.completed":
		v.status = ev.Status
	case "session.stopped":
		v.status = "stopped"
	}
	v.last = append(v.last, eventLine(ev))
	if len(v.last) > 10 {
		v.last = v.last[len(v.last)-10:]
	}
}

func eventLine(ev *pb.Event) string {
	t := ""
	if ev.Time != nil {
		t = ev.Time.AsTime().Local().Format("15:04:05.000")
	}
	parts := []string{t, ev.Kind}
	if ev.Node != "" {
		parts = append(parts, ev.Node)
	}
	if ev.Status != "" {
		parts = append(parts, ev.Status)
	}
	if ev.Message != "" {
		parts = append(parts, firstLine(ev.Message))
	}
	return strings.Join(parts, "  ")
}

// render draws the live view.
func (v *watchView) render(w io.Writer) {
	v.mu.Lock()
	defer v.mu.Unlock()
	var b strings.Builder
	b.WriteString("\x1b[H\x1b[2J")
	fmt.Fprintf(&b, "session %s", v.session)
	if v.status != "" {
		fmt.Fprintf(&b, " — %s", v.status)
	}
	fmt.Fprintf(&b, "   tokens %d in / %d out   cost $%.4f\n\n", v.usage.InputTokens, v.usage.OutputTokens, v.usage.Cost)
	ids := make([]string, 0, len(v.nodes))
	inFlight := 0
	for id, n := range v.nodes {
		ids = append(ids, id)
		if n.state == "running" {
			inFlight++
		}
	}
	sort.Strings(ids)
	fmt.Fprintf(&b, "%-24s %-16s %5s  %-28s  %s\n", "NODE", "STATE", "RUNS", "USAGE", "DETAIL")
	for _, id := range ids {
		n := v.nodes[id]
		usage := ""
		if u := &n.usage; u.InputTokens+u.OutputTokens > 0 || u.Cost > 0 {
			usage = fmt.Sprintf("%d/%d tok $%.4f", u.InputTokens, u.OutputTokens, u.Cost)
		}
		fmt.Fprintf(&b, "%-24s %-16s %5d  %-28s  %s\n", id, n.state, n.runs, usage, n.detail)
	}
	fmt.Fprintf(&b, "\nin flight: %d\n", inFlight)
	for node, msg := range v.budgets {
		fmt.Fprintf(&b, "budget %s: %s\n", node, msg)
	}
	b.WriteString("\nlast events:\n")
	for _, l := range v.last {
		b.WriteString("  " + l + "\n")
	}
	_, _ = io.WriteString(w, b.String())
}

func watch(ctx context.Context, nc *nats.Conn, id string, out io.Writer, live bool, timeout time.Duration) error {
	v := &watchView{session: id, nodes: map[string]*nodeView{}, budgets: map[string]string{}}
	ch := make(chan *nats.Msg, 4096)
	sub, err := nc.ChanSubscribe(broker.AllEvents(id), ch)
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		return &exitError{code: 1, err: err}
	}
	// The snapshot: every node's state at once, after the subscription so
	// that no event is missed between them.
	data, _ := json.Marshal(actors.ExplainRequest{})
	rctx, cancel := context.WithTimeout(ctx, timeout)
	msg, err := nc.RequestWithContext(rctx, broker.Control(id, "explain"), data)
	cancel()
	if err != nil {
		return &exitError{code: 1, err: fmt.Errorf("session %s did not answer within %s: unknown, or not running (%v)", id, timeout, err)}
	}
	var snap actors.ExplainReply
	if err := json.Unmarshal(msg.Data, &snap); err != nil {
		return &exitError{code: 1, err: fmt.Errorf("session %s: bad snapshot: %v", id, err)}
	}
	v.snapshot(snap.States)
	if !live {
		for _, st := range snap.States {
			line := st.Node + "  " + st.State
			if st.Reason != "" {
				line += "  " + firstLine(st.Reason)
			}
			fmt.Fprintln(out, line)
		}
	}
	var tick <-chan time.Time
	if live {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		tick = t.C
		v.render(out)
	}
	for {
		select {
		case m := <-ch:
			ev := &pb.Event{}
			if proto.Unmarshal(m.Data, ev) != nil {
				continue
			}
			v.apply(ev)
			if !live {
				fmt.Fprintln(out, eventLine(ev))
			}
			if ev.Kind == "session.completed" || ev.Kind == "session.stopped" {
				if live {
					v.render(out)
				}
				return nil
			}
		case <-tick:
			v.render(out)
		case <-ctx.Done():
			return nil
		}
	}
}
