package actors

import (
	"crypto/hmac"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/switchyard/switchyard/broker"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// Ingress. Everything that arrives on a session's subjects may come from
// outside: any holder of the outside credential may publish on node
// inboxes and edges (docs/security.md). checkIngress is the one place an
// arriving envelope is checked after it is decoded and before it reaches a
// node; an envelope it refuses is rejected (envelope.rejected event, dead
// letter subject) and never fires a node.

// Limits of an envelope's artifacts.
const (
	maxArtifacts    = 256  // per envelope
	maxArtifactName = 255  // bytes: a file name
	maxObjectPath   = 1024 // bytes: the object's name in the store
)

// errIngress marks the refusals of checkIngress.
var errIngress = errors.New("envelope refused")

// checkIngress checks an envelope that arrived on one of the session's
// subjects, with own its HeaderOwn value: its artifacts must stay in this
// session (see checkArtifact). An envelope that is not the runtime's own
// (no valid HeaderOwn proof: System.Send adds one to everything the
// runtime publishes, replays after a resume or a fork included) is outside
// input: the engine's state it carries — run context keys internal.*
// (agent threads, retry counts, outcomes for goal gates) and
// parallel-branch tokens — is dropped, so an outside client can neither
// make an agent resume another conversation nor complete a join.
func (s *System) checkIngress(env *pb.Envelope, own string) error {
	_, err := s.admit(env, own)
	return err
}

// admit is checkIngress, and reports whether the envelope is one of the
// runtime's own (its proof holds).
func (s *System) admit(env *pb.Envelope, proof string) (own bool, err error) {
	if err := checkEnvelope(s.cfg.SessionID, env); err != nil {
		return false, err
	}
	own = s.ownEnvelope(env.GetId(), proof)
	if !own {
		stripEngineState(env)
	}
	return own, nil
}

// ownEnvelope reports whether proof shows that id is one of the runtime's
// envelopes.
func (s *System) ownEnvelope(id, proof string) bool {
	return id != "" && len(proof) == idTagLen && hmac.Equal([]byte(proof), []byte(s.ids.proof(id)))
}

// internalPrefix starts the run context keys that are the engine's state.
const internalPrefix = "internal."

// stripEngineState drops what only the runtime may set from an outside
// envelope.
func stripEngineState(env *pb.Envelope) {
	env.Branches = nil
	env.Root = "" // an outside envelope is its own root (rootOf)
	// Its context is its whole context: an outside envelope names no base.
	env.ContextBase, env.ContextVersion = "", 0
	env.Context = withoutInternal(env.Context)
	env.ContextUpdates = withoutInternal(env.ContextUpdates)
}

func withoutInternal(kvs []*pb.KV) []*pb.KV {
	out := kvs[:0]
	for _, kv := range kvs {
		if !strings.HasPrefix(kv.GetKey(), internalPrefix) {
			out = append(out, kv)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// checkEnvelope is checkIngress for session.
func checkEnvelope(session string, env *pb.Envelope) error {
	arts := env.GetPayload().GetArtifacts()
	if len(arts) > maxArtifacts {
		return fmt.Errorf("%w: %d artifacts (at most %d)", errIngress, len(arts), maxArtifacts)
	}
	for i, a := range arts {
		if _, err := checkArtifact(session, a); err != nil {
			return fmt.Errorf("%w: artifact %d: %v", errIngress, i, err)
		}
	}
	return nil
}

// checkArtifact checks one artifact of an envelope of session and returns
// the object's name in the session's store (a clean relative path, where
// the receiving node's copy goes under {stage}/inputs/).
//
//   - its name is a file name: no path separator, not "." or "..", not
//     empty unless the reference names the object (its last element is
//     then the name);
//   - its reference points into the session's own object store:
//     obj://sy_obj_<session>/<object>, the object's name a relative path
//     with no "." or ".." element; anything else (another session's store,
//     file://, http://, a bare path) is refused;
//   - its sha256, when given, is 64 lowercase hex digits; its size is not
//     negative.
func checkArtifact(session string, a *pb.Artifact) (string, error) {
	obj, err := objectOf(session, a.GetRef())
	if err != nil {
		return "", err
	}
	if name := a.GetName(); name != "" {
		if err := fileName(name); err != nil {
			return "", err
		}
	}
	if sum := a.GetSha256(); sum != "" && !lowerHex(sum, 64) {
		return "", fmt.Errorf("sha256 %q is not 64 lowercase hex digits", clip(sum))
	}
	if a.GetSize() < 0 {
		return "", fmt.Errorf("negative size %d", a.GetSize())
	}
	return obj, nil
}

// objectOf is the object a reference names in session's own store.
func objectOf(session, ref string) (string, error) {
	prefix := "obj://" + broker.ObjectsName(session) + "/"
	obj, ok := strings.CutPrefix(ref, prefix)
	if !ok {
		return "", fmt.Errorf("reference %q is not in this session's object store (%s)", clip(ref), prefix)
	}
	if len(obj) > maxObjectPath || !utf8.ValidString(obj) || !fs.ValidPath(obj) || obj == "." ||
		strings.ContainsAny(obj, "\\\x00") || hasControl(obj) {
		return "", fmt.Errorf("reference %q does not name an object (a relative path without . or .. elements)", clip(ref))
	}
	return obj, nil
}

// fileName checks that name is a plain file name.
func fileName(name string) error {
	switch {
	case name == "." || name == "..":
		return fmt.Errorf("name %q is not a file name", name)
	case strings.ContainsAny(name, "/\\"):
		return fmt.Errorf("name %q is not a file name: it has a path separator", clip(name))
	case len(name) > maxArtifactName:
		return fmt.Errorf("name is %d bytes long (at most %d)", len(name), maxArtifactName)
	case !utf8.ValidString(name) || strings.ContainsRune(name, 0) || hasControl(name):
		return fmt.Errorf("name %q is not a file name: invalid or control characters", clip(name))
	}
	return nil
}

// artifactName is the name a handler sees: the artifact's, else the last
// element of its object's name.
func artifactName(a *pb.Artifact, obj string) string {
	if n := a.GetName(); n != "" {
		return n
	}
	return path.Base(obj)
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return true
		}
	}
	return false
}

func lowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// clip shortens what a refusal quotes of hostile input.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
