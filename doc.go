// Package switchyard is the Go API of the Switchyard runtime: build a graph
// of Go agents, tools, outputs and handlers (or read one from DOT), run it
// as a session on the real runtime — one actor per node, envelopes on NATS,
// the scheduler, checkpoints and events — and get a report.
//
//	g := switchyard.New("review")
//	g.Agent("draft", drafter)
//	g.Agent("critique", critic)
//	g.Chain("draft", "critique")
//	rep, err := switchyard.Run(ctx, g, switchyard.Message{Text: "a haiku about NATS"})
//	fmt.Println(rep.Result.Text)
//
// # State
//
// A session's state is its run context, a map of strings carried with
// every envelope (so it crosses processes and survives checkpoints). Every
// node that produces output (a non-empty response) stores it under its own
// id and under "_previous"; "_input" holds the session input's text. A
// node that produces nothing (start, exit, parallel, a diamond that routes)
// leaves the state unchanged, and so does a node that failed or was
// skipped. Edge conditions read state keys by name: `classify=billing`.
//
// # Metadata
//
// Metadata is a map of strings that travels alongside the messages. The
// session input's metadata is the base; each node's reply metadata is
// merged over what it received (its keys win) and sent on with its
// output, so every later node sees the union, later nodes winning. When a
// node fires on several envelopes (a join), their metadata is merged in
// arrival order, later arrivals winning. The report's Result carries the
// metadata that reached the end.
//
// # Caller
//
// The tenant, user, trace and custom keys of nodes.WithCaller on the
// context given to Run reach every node's context (nodes.CallerFrom), are
// carried with every envelope in NATS headers, and appear in the events.
package switchyard
