package broker

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
)

// adminUser is the user name of the runtime's own connections to a
// listening embedded server.
const adminUser = "switchyard-runtime"

// RuntimeInboxPrefix is the reply inbox prefix of the runtime's own
// connections (NewConn): JetStream API replies, KV and object-store reads,
// consumer deliveries and control replies arrive under it. No outside
// role may subscribe to it, so none of that traffic can be read with an
// outside credential. On an external server the runtime's user must be
// allowed to subscribe to RuntimeInboxPrefix + ".>".
const RuntimeInboxPrefix = "_SYRT"

// Subjects an outside user may use: publish on node inboxes and edges,
// ask a session to explain its nodes' states (sy.*.ctl.explain: read
// only, as the events are), subscribe to events and to the reply inbox of
// its own connection (PrivateInbox). Nothing else, and in particular
// neither the control subjects that act, nor the JetStream API, nor
// another connection's replies.
var (
	outsidePublish   = []string{"sy.*.node.*.in", "sy.*.edge.>", "sy.*.ctl.explain"}
	outsideSubscribe = []string{"sy.*.evt.>", "sy.*.json.evt.>"}
)

// Subjects a worker (Config.WorkerToken) may use: the protocol of package
// pool (docs/workers.md), spelled out here because broker sits below pool
// (pool's tests check that a worker with this role serves jobs). A worker
// may read the work stream's and the job graphs' descriptions, read its
// pools' consumers (pool_<name>; every consumer of SY_WORK is a pool's, and
// a permission cannot match part of a token) but not make them (a
// consumer's configuration could filter another pool's jobs or push them
// onto any subject: the server's deliveries are not the worker's
// publishes; the owner makes a pool's consumer with its first job), pull and acknowledge their jobs
// (in-progress acks too), read the graphs jobs refer to (bucket
// sy_work_graphs), publish outcomes (syo.>, which the owner checks against
// the attempt it waits for) and answer request-mode jobs (syr.>, one reply
// per request). It may not publish on any session subject (edges, inboxes,
// control: no answering gates, no stopping), read a session's stream or
// bucket (journals, checkpoints, artifacts), nor change or delete streams
// and consumers.
//
// A pool's worker (Config.PoolTokens) has the same role narrowed to one
// pool, p: its consumer pool_<p> (info, pull, and acks, whose subjects name
// the consumer: $JS.ACK.SY_WORK.pool_<p>.>) and its request-mode jobs
// (syr.<p>.>). It still publishes outcomes on syo.>: an attempt's reply
// subject ends with a tag only the session can compute (pool.ReplyTag), so
// a worker can answer only the jobs it was given — those of its pool.
func workerRole(pool string) (publish, subscribe []string) {
	consumer, acks, requests := "*", "$JS.ACK.SY_WORK.>", "syr.>"
	if pool != "" {
		consumer = "pool_" + pool
		acks, requests = "$JS.ACK.SY_WORK."+consumer+".>", "syr."+pool+".>"
	}
	return []string{
		"$JS.API.STREAM.INFO.SY_WORK",
		"$JS.API.STREAM.INFO.SYW_OUTCOMES",
		"$JS.API.CONSUMER.INFO.SY_WORK." + consumer,
		"$JS.API.CONSUMER.MSG.NEXT.SY_WORK." + consumer,
		acks,
		"$JS.API.STREAM.INFO.KV_sy_work_graphs",
		"$JS.API.STREAM.MSG.GET.KV_sy_work_graphs",
		"$JS.API.DIRECT.GET.KV_sy_work_graphs.>",
		"syo.>",
	}, []string{requests}
}

// workerResponses lets a worker answer each request-mode job it receives
// once, within the longest a request waits (pool.RequestTimeout).
var workerResponses = &server.ResponsePermission{MaxMsgs: 1, Expires: 10 * time.Minute}

// Private reply inboxes. nats-server has no per-connection subscribe
// permission of its own, and every holder of the outside token is the same
// user, so a per-user inbox prefix would let one token holder read
// another's replies. Instead a connection names its own inbox: a client
// that connects with a connection name that is a PrivateInboxName (at
// least minInboxName characters of [A-Za-z0-9_-], e.g. a nuid) may
// subscribe to _INBOX.<name>.> and nothing else under _INBOX. The name is
// known only to the client and the server (it is never shown to other
// clients), so no one else can ask for the same inbox. PrivateInbox gives
// a nats.go client both options.
const minInboxName = 16

// PrivateInboxName reports whether name may name a connection's private
// reply inbox.
func PrivateInboxName(name string) bool {
	if len(name) < minInboxName || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// PrivateInbox returns the options that give a nats.go connection to a
// listening Switchyard server a private reply inbox: a random connection
// name and the inbox prefix _INBOX.<name>, so request/reply and JetStream
// publishes work with an outside credential. prefix (may be empty) starts
// the name, for the server's connection list.
func PrivateInbox(prefix string) []nats.Option {
	name := prefix + nuid.Next()
	return []nats.Option{nats.Name(name), nats.CustomInboxPrefix("_INBOX." + name)}
}

// newSecret is a random password for the runtime's own connections; it
// never leaves the process.
func newSecret() string {
	var k [16]byte
	_, _ = rand.Read(k[:])
	return hex.EncodeToString(k[:])
}

// auth authenticates the clients of a listening embedded server and gives
// each one of two roles, as a nats-server User with Permissions:
//
//   - admin, every permission: the runtime's own connections (adminUser
//     with the per-broker secret) and holders of Config.AdminToken;
//   - worker, the worker permissions above: holders of Config.WorkerToken,
//     and of a pool's token in Config.PoolTokens, narrowed to that pool;
//   - outside, the permissions above: holders of Config.Token or of
//     Config.User and Config.Password.
//
// It is a CustomClientAuthentication rather than Options.Users because
// nats-server gives token-authenticated clients no permissions of their
// own, outside users may authenticate with a token, and each outside
// connection gets permissions of its own (its private inbox).
type auth struct {
	cfg    Config
	secret string
}

// eq compares a configured credential with a presented one in constant
// time; an empty configured credential never matches.
func eq(configured, presented string) bool {
	return configured != "" && subtle.ConstantTimeCompare([]byte(configured), []byte(presented)) == 1
}

// Check implements server.Authentication.
func (a *auth) Check(c server.ClientAuthentication) bool {
	o := c.GetOpts()
	switch {
	case o.Username == adminUser && eq(a.secret, o.Password):
		c.RegisterUser(&server.User{Username: adminUser})
	case o.Username == "" && eq(a.cfg.AdminToken, o.Token):
		c.RegisterUser(&server.User{Username: "admin"})
	case o.Username == "" && eq(a.cfg.WorkerToken, o.Token):
		c.RegisterUser(&server.User{Username: "worker", Permissions: workerPermissions(o.Name, "")})
	case o.Username == "" && a.poolOf(o.Token) != "":
		pool := a.poolOf(o.Token)
		c.RegisterUser(&server.User{Username: "worker:" + pool, Permissions: workerPermissions(o.Name, pool)})
	case (o.Username == "" && eq(a.cfg.Token, o.Token)) ||
		(a.cfg.User != "" && o.Username == a.cfg.User && eq(a.cfg.Password, o.Password)):
		c.RegisterUser(&server.User{Username: "outside", Permissions: outsidePermissions(o.Name)})
	default:
		return false
	}
	return true
}

// outsidePermissions is a fresh copy of the outside role's permissions for
// a connection named name.
func outsidePermissions(name string) *server.Permissions {
	sub := append([]string(nil), outsideSubscribe...)
	if PrivateInboxName(name) {
		sub = append(sub, "_INBOX."+name+".>")
	}
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: append([]string(nil), outsidePublish...)},
		Subscribe: &server.SubjectPermission{Allow: sub},
	}
}

// poolOf is the pool whose token presented is ("" when none): every
// configured token is compared, in constant time.
func (a *auth) poolOf(presented string) string {
	found := ""
	for pool, tok := range a.cfg.PoolTokens {
		if eq(tok, presented) {
			found = pool
		}
	}
	return found
}

// workerPermissions is a fresh copy of the worker role's permissions for
// a connection named name (its private inbox, as an outside connection's),
// narrowed to pool's jobs unless pool is "".
func workerPermissions(name, pool string) *server.Permissions {
	pub, sub := workerRole(pool)
	if PrivateInboxName(name) {
		sub = append(sub, "_INBOX."+name+".>")
	}
	resp := *workerResponses
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: pub},
		Subscribe: &server.SubjectPermission{Allow: sub},
		Response:  &resp,
	}
}
