package broker

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"

	"github.com/nats-io/nats-server/v2/server"
)

// adminUser is the user name of the runtime's own connections to a
// listening embedded server.
const adminUser = "switchyard-runtime"

// Subjects an outside user may use: publish on node inboxes and edges,
// subscribe to events and reply inboxes. Nothing else, and in particular
// neither control subjects nor the JetStream API.
var (
	outsidePublish   = []string{"sy.*.node.*.in", "sy.*.edge.>"}
	outsideSubscribe = []string{"sy.*.evt.>", "_INBOX.>"}
)

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
//   - outside, the permissions above: holders of Config.Token or of
//     Config.User and Config.Password.
//
// It is a CustomClientAuthentication rather than Options.Users because
// nats-server gives token-authenticated clients no permissions of their
// own, and outside users may authenticate with a token.
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
	case (o.Username == "" && eq(a.cfg.Token, o.Token)) ||
		(a.cfg.User != "" && o.Username == a.cfg.User && eq(a.cfg.Password, o.Password)):
		c.RegisterUser(&server.User{Username: "outside", Permissions: outsidePermissions()})
	default:
		return false
	}
	return true
}

// outsidePermissions is a fresh copy of the outside role's permissions.
func outsidePermissions() *server.Permissions {
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: append([]string(nil), outsidePublish...)},
		Subscribe: &server.SubjectPermission{Allow: append([]string(nil), outsideSubscribe...)},
	}
}
