package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/session"
)

// Shell completion (switchyard completion bash|zsh|fish|powershell, from
// cobra) completes session ids and node ids: the sessions served on the
// server of --nats (as `switchyard sessions` lists them, with the same
// credentials), a session's node ids from the graph it runs now, and the
// durable sessions of the store (--data or --nats) for resume and
// history.

// completeArgs says what each positional argument of a command is.
var completeArgs = map[string][]string{
	"explain": {"session", "node"},
	"trigger": {"session", "node"},
	"chat":    {"session", "node"},
	"pub":     {"session", "node"},
	"answer":  {"session", "node"},
	"stop":    {"session"},
	"watch":   {"session"},
	"edit":    {"session", "file"},
	"resume":  {"stored"},
	"history": {"stored"},
}

// completionWait bounds how long a completion waits for servers to
// answer: a shell is waiting.
const completionWait = 2 * time.Second

// addCompletions sets the ValidArgsFunction of the commands that take
// session and node ids.
func addCompletions(root *cobra.Command) {
	for _, cmd := range root.Commands() {
		kinds, ok := completeArgs[cmd.Name()]
		if !ok {
			continue
		}
		cmd.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) >= len(kinds) {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			switch kinds[len(args)] {
			case "session":
				return matching(liveSessions(cmd), toComplete), cobra.ShellCompDirectiveNoFileComp
			case "node":
				return matching(liveNodes(cmd, args[0]), toComplete), cobra.ShellCompDirectiveNoFileComp
			case "stored":
				return matching(storedSessions(cmd), toComplete), cobra.ShellCompDirectiveNoFileComp
			case "file":
				return []cobra.Completion{"dot"}, cobra.ShellCompDirectiveFilterFileExt
			}
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
	}
}

// matching keeps the candidates ("id\tdescription") that start with
// prefix, sorted.
func matching(all []cobra.Completion, prefix string) []cobra.Completion {
	var out []cobra.Completion
	for _, c := range all {
		if strings.HasPrefix(c, prefix) {
			out = append(out, c)
		}
	}
	sort.Strings(out)
	return out
}

// connOf reads the connection flags of a command that talks to a server.
func connOf(cmd *cobra.Command) *connFlags {
	fl := cmd.Flags()
	c := &connFlags{}
	c.url, _ = fl.GetString("nats")
	c.token, _ = fl.GetString("token")
	c.user, _ = fl.GetString("user")
	c.password, _ = fl.GetString("password")
	c.tlsCA, _ = fl.GetString("tls-ca")
	c.timeout, _ = fl.GetDuration("timeout")
	if c.timeout <= 0 || c.timeout > completionWait {
		c.timeout = completionWait
	}
	return c
}

// listSessions asks every serving process on the server for its sessions
// and collects the answers until wait has passed, or 200ms after the last
// answer (the other processes have answered by then). A permission error
// on denied (the connection's, nil = none) before any answer means the
// credential may not ask.
func listSessions(nc *nats.Conn, denied <-chan error, wait time.Duration) ([]SessionInfo, error) {
	inbox := nc.NewInbox()
	ch := make(chan *nats.Msg, 64)
	sub, err := nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(SessionsSubject, inbox, nil); err != nil {
		return nil, err
	}
	var all []SessionInfo
	timer := time.NewTimer(wait) // a CLI's own deadline, not a session's time
	defer timer.Stop()
	for {
		select {
		case err := <-denied:
			if len(all) == 0 {
				return nil, fmt.Errorf("%w: %v", errPermissionDenied, err)
			}
		case m := <-ch:
			var list []SessionInfo
			if json.Unmarshal(m.Data, &list) == nil {
				all = append(all, list...)
			}
			timer.Reset(200 * time.Millisecond) // more processes may answer
		case <-timer.C:
			return dedupeWaiting(all), nil
		}
	}
}

// dedupeWaiting keeps one entry per session that members list as waiting
// (every member may list it), and none for a session a process runs.
func dedupeWaiting(all []SessionInfo) []SessionInfo {
	run := map[string]bool{}
	for _, s := range all {
		if s.Status != "waiting" {
			run[s.ID] = true
		}
	}
	out := all[:0]
	seen := map[string]bool{}
	for _, s := range all {
		if s.Status == "waiting" {
			if run[s.ID] || seen[s.ID] {
				continue
			}
			seen[s.ID] = true
		}
		out = append(out, s)
	}
	return out
}

// served lists the sessions served on the command's server; nil when it
// cannot be reached.
func served(cmd *cobra.Command) []SessionInfo {
	c := connOf(cmd)
	if c.url == "" {
		return nil
	}
	nc, err := c.connect()
	if err != nil {
		return nil
	}
	defer nc.Close()
	list, _ := listSessions(nc, c.denied, c.timeout)
	return list
}

func liveSessions(cmd *cobra.Command) []cobra.Completion {
	var out []cobra.Completion
	for _, s := range served(cmd) {
		out = append(out, cobra.CompletionWithDesc(s.ID, s.Graph+" ("+s.Status+")"))
	}
	return out
}

func liveNodes(cmd *cobra.Command, id string) []cobra.Completion {
	var out []cobra.Completion
	for _, s := range served(cmd) {
		if s.ID == id {
			out = append(out, s.Nodes...)
		}
	}
	return out
}

// storedSessions lists the durable sessions of the command's store
// (--nats, else the embedded server on --data).
func storedSessions(cmd *cobra.Command) []cobra.Completion {
	fl := cmd.Flags()
	sf := &storeFlags{}
	sf.nats, _ = fl.GetString("nats")
	sf.data, _ = fl.GetString("data")
	sf.token, _ = fl.GetString("token")
	sf.user, _ = fl.GetString("user")
	sf.password, _ = fl.GetString("password")
	sf.tlsCA, _ = fl.GetString("tls-ca")
	ctx, cancel := context.WithTimeout(context.Background(), completionWait)
	defer cancel()
	b, err := openStore(ctx, sf.config(), cmd.Name())
	if err != nil {
		return nil
	}
	defer b.Close()
	list, err := session.List(ctx, b)
	if err != nil {
		return nil
	}
	var out []cobra.Completion
	for _, s := range list {
		out = append(out, cobra.CompletionWithDesc(s.ID, s.Status))
	}
	return out
}
