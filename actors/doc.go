// Package actors runs a graph: one protoactor-go actor per node, fed by NATS
// subscriptions on the node's edge subjects and inbox.
//
// A node actor never blocks in Receive. When an envelope arrives it is
// queued; when the node may fire, the actor starts its handler on a goroutine
// owned by the System (with a context that carries the node's timeout), and
// the outcome comes back to the actor as a message. The actor then applies
// the outcome: it updates the token's context, chooses the outgoing edges by
// the node's routing policy (select one edge for pipelines, broadcast for
// parallel nodes and reactive sessions), commits the firing to the Journal
// (the checkpoint) and only then publishes the next envelopes and events.
//
// A panicking handler fails its node with the panic as the failure reason;
// it never takes the process down.
//
// Lock order: System.mu is never held while calling into an actor, the
// Journal or NATS.
package actors
