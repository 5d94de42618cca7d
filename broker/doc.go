// Package broker owns Switchyard's NATS: an embedded nats-server started
// in-process with JetStream on a data directory (the default, needing no
// setup), or a connection to an external server or cluster by URL. It also
// owns the subject layout (subjects.go) and the JetStream resources of a
// session: its stream, KV bucket and object store (streams.go).
//
// Broker.Close drains the connection and, for an embedded server, shuts it
// down and waits for it. The embedded server opens no TCP port unless
// Config.Listen asks for one; the runtime connects in-process.
package broker
