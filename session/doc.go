// Package session wires the graph, the broker, the node actors and the
// handlers into a running session, and is the Go API a library user calls.
//
// A session is started with Start (or Resume, from a checkpoint), observed
// through its events (published on sy.<session>.evt.<kind> and delivered to
// the Observer in Config), and ended by its own completion or by Stop. Wait
// returns the Report: the final status and, per node, status, attempts,
// duration, output and usage.
//
// The run directory (Config.LogsDir) holds manifest.json, checkpoint.json
// (written after every node) and one directory per executed node with
// prompt.md, response.md and status.json.
//
// A durable session bounds its store: the journal keeps its last
// JournalKeep commits (and a snapshot), the work stream what is not yet
// consumed, and the object store the artifacts of the last JournalKeep
// commits plus any a live envelope still refers to (artifact_retention.go).
//
// A durable session has one runner, the holder of its lease (lease.go).
// The processes of a deployment that run sessions are its members; the
// sessions nobody runs are spread over them (Place, placement.go), and a
// member that runs more than its share hands the surplus to members that
// joined later (Rebalance, rebalance.go) with Handover, which lets the
// running firings finish and releases the lease at once (handover.go).
package session
