// Package nodes holds what a node does: the Handler interface and its
// Input and Outcome, the Registry of handler types, the built-in handlers,
// the Interviewer through which human gates ask people, and handler
// middleware.
//
// Handlers know nothing of NATS or actors: the node actor (package actors)
// calls Handle on a goroutine of its own with the node's timeout in ctx,
// recovers panics, applies the Outcome (context updates, routing, retries,
// checkpoints). A handler does the node's work only.
//
// Built-in types (RegisterBuiltins, with their dependencies in Deps):
//
//   - start, exit: do nothing.
//   - codergen: runs an agent.Provider on the node's prompt, writing
//     prompt.md, response.md and status.json in the stage directory; a
//     status.json the agent writes (StatusFile) decides the outcome.
//   - conditional: passes the previous outcome through, or with a prompt
//     runs its agent and routes on an OUTCOME marker (DetectOutcomeMarker).
//   - wait.human: asks the Interviewer to choose an outgoing edge (Choices,
//     Match); AutoApprove, Console, Queue, Callback and Recording are
//     interviewers.
//   - tool: runs tool_command with sh -c in its own process group, with the
//     tool_hooks.pre and tool_hooks.post hooks.
//   - parallel, parallel.fan_in: the fork (the runtime runs the branches)
//     and the join, which merges what every branch learned.
//   - stack.manager_loop: runs a child pipeline through a ChildRunner and
//     supervises it on the injected clock.
//
// Library users register their own types with Registry.Register and
// replace built-ins deliberately with Registry.Replace. Middleware (Chain,
// Recover, Timeout) wraps any handler.
package nodes
