// Package broker owns Switchyard's NATS: an embedded nats-server started
// in-process with JetStream on a data directory (the default, needing no
// setup), or a connection to an external server or cluster by URL. It also
// owns the subject layout (subjects.go) and the JetStream resources of a
// session (streams.go).
//
// # The embedded server
//
// Start builds the server's options (no signal handling, JetStream on
// Config.DataDir), starts it, waits until it is ready, and connects to it
// in-process. It opens no TCP port unless Config.Listen asks for one.
// Close drains the connection, shuts the server down and waits for it; it
// is idempotent. The server's log goes to Config.Logger, discarded when nil.
//
// # Roles on a listening server
//
// A listening server requires credentials. Admins (the runtime's own
// in-process connections and holders of Config.AdminToken) may do
// everything. Outside users (Config.Token, or Config.User and
// Config.Password) may publish on node inboxes (sy.*.node.*.in) and edges
// (sy.*.edge.>), ask sy.*.ctl.explain, and subscribe to events
// (sy.*.evt.>, and their JSON form sy.*.json.evt.>) and to their own
// connection's private reply inbox (PrivateInbox) only: no other control
// subjects, no JetStream API, no other connection's replies (the runtime's
// own replies arrive under RuntimeInboxPrefix). Workers (Config.WorkerToken)
// may pull, acknowledge and answer pool jobs and read the graphs they name,
// and nothing of any session's subjects or store; a pool's workers
// (Config.PoolTokens) the same for that pool's jobs only. docs/security.md is the
// user's account of the roles. A denied publish reaches
// the client's asynchronous error handler as nats.ErrPermissionViolation.
//
// # An external server
//
// With Config.URL the broker connects with Config's credentials and
// reconnects forever, buffering publishes (up to 64 MiB) while the server
// is away, so a server restart is ridden through.
//
// # Session resources
//
// A session has a work stream SY_<session> (the inboxes and edges of its
// graph — what outside clients publish there and what a resume publishes
// again; the runtime hands what one node sends another in process —, listed one by one up to MaxListedSubjects (Inbound, SetInbound),
// else the session's own Stored subjects, where the serving session stores
// the outside input it checked (WorkSubjects); de-duplicated by
// Nats-Msg-Id), a bounded
// dead-letter stream SYDLQ_<session> (made before its first dead letter),
// an optional bounded event stream
// SY_<session>_EVT, a KV bucket sy_kv_<session> for checkpoints and node
// state, and an object store sy_obj_<session> for artifacts. Control
// subjects are in no stream: they are requests answered by the running
// session. EnsureSessionStream explains why events are kept apart. A
// completed session's bucket and object store move into the archive
// (archive.go), one bucket and one object store shared by every completed
// session of the store.
package broker
