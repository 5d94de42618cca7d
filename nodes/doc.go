// Package nodes holds what a node does: the Handler interface, the
// Registry of handler types, the built-in handlers (start, exit, codergen,
// conditional, wait.human, tool, parallel, parallel.fan_in,
// stack.manager_loop), the Interviewer through which human gates ask
// people, and handler middleware.
//
// Handlers know nothing of NATS or actors: the node actor (package actors)
// calls Handle on a goroutine of its own and applies the Outcome.
package nodes
