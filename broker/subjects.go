package broker

import (
	"errors"
	"strings"
)

// Subject prefixes of the layout in DESIGN.md:
//
//	sy.<session>.edge.<from>.<to>[.<n>]  one subject per edge
//	sy.<session>.node.<id>.in            a node's inbox
//	sy.<session>.ctl.<verb>              trigger, answer, pause, resume, cancel, edit
//	sy.<session>.evt.<kind>              the event stream (kinds are dotted)
//	sy.<session>.dlq                     rejected envelopes
//	sy.<session>.w.edge.… sy.<session>.w.node.<id>.in
//	                                     the work stream's own copies of
//	                                     the edges and inboxes (Stored), in
//	                                     sessions whose outside input
//	                                     passes through the session
//	                                     (WorkSubjects)
//
// The builders do not check their arguments (they are on the hot path):
// session and node ids must be ValidTokens, event kinds dot-separated
// ValidTokens, and what they build then parses back with ParseSubject.
const root = "sy"

// ValidToken reports whether s may be used as a session or node id inside a
// subject: [A-Za-z_][A-Za-z0-9_-]*.
func ValidToken(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'):
		case i > 0 && ((c >= '0' && c <= '9') || c == '-'):
		default:
			return false
		}
	}
	return true
}

// Edge is the subject of an edge; edgeID is "from.to" or "from.to.n".
func Edge(session, edgeID string) string { return root + "." + session + ".edge." + edgeID }

// NodeIn is a node's inbox.
func NodeIn(session, node string) string { return root + "." + session + ".node." + node + ".in" }

// Control is a control verb's subject.
func Control(session, verb string) string { return root + "." + session + ".ctl." + verb }

// Event is the subject of one event kind.
func Event(session, kind string) string { return root + "." + session + ".evt." + kind }

// JSONEvent is the subject of one event kind in JSON, for any NATS client.
func JSONEvent(session, kind string) string { return root + "." + session + ".json.evt." + kind }

// AllJSONEvents matches every JSON event of a session.
func AllJSONEvents(session string) string { return root + "." + session + ".json.evt.>" }

// AllEvents matches every event of a session.
func AllEvents(session string) string { return root + "." + session + ".evt.>" }

// workToken is the token after the session's in the work stream's own
// subjects (Stored).
const workToken = "w"

// Stored is the subject under which a session's work stream stores what
// arrives for subject, an edge or inbox of the session, when outside
// input passes through the serving session (WorkSubjects, ingress):
// sy.<session>.w.edge.<from>.<to> for sy.<session>.edge.<from>.<to>,
// sy.<session>.w.node.<id>.in for sy.<session>.node.<id>.in. Outside
// credentials may not publish there (docs/security.md): only the runtime
// stores under it, after checking what it stores. subject must be one of
// the session's subjects (it is not checked: the hot path).
func Stored(subject string) string {
	i := sessionEnd(subject)
	if i < 0 {
		return subject
	}
	return subject[:i] + workToken + "." + subject[i:]
}

// Unstored is the edge or inbox subject a subject of Stored stands for;
// any other subject is returned as it is.
func Unstored(subject string) string {
	i := sessionEnd(subject)
	if i < 0 {
		return subject
	}
	if rest, ok := strings.CutPrefix(subject[i:], workToken+"."); ok {
		return subject[:i] + rest
	}
	return subject
}

// sessionEnd is the index after "sy.<session>." in subject, or -1.
func sessionEnd(subject string) int {
	i := strings.IndexByte(subject, '.')
	if i < 0 {
		return -1
	}
	j := strings.IndexByte(subject[i+1:], '.')
	if j < 0 {
		return -1
	}
	return i + j + 2
}

// AllStored matches every subject of Stored of a session.
func AllStored(session string) string { return root + "." + session + "." + workToken + ".>" }

// SessionAll matches every subject of a session.
func SessionAll(session string) string { return root + "." + session + ".>" }

// VerdictHeader is a header of an envelope published on a session's node
// inbox or edge: the reply inbox where the serving session sends its
// verdict, {"ok":true,"session":S} or {"ok":false,"error":"no node X in
// session S (its nodes: ...)"}. switchyard pub uses it to learn that the
// session exists and takes the envelope.
const VerdictHeader = "Switchyard-Verdict"

// DeadLetter is where rejected envelopes go.
func DeadLetter(session string) string { return root + "." + session + ".dlq" }

// Kinds of subject.
const (
	KindEdge    = "edge"
	KindNode    = "node"
	KindControl = "ctl"
	KindEvent   = "evt"
	KindDLQ     = "dlq"
)

// Subject is a parsed Switchyard subject. Which fields are set depends on
// Kind: edge sets From, To and Index ("" without the .<n> suffix); node sets
// Node; ctl sets Verb; evt sets Event (dotted, "node.completed"); dlq sets
// none.
type Subject struct {
	Session string
	Kind    string // KindEdge, KindNode, KindControl, KindEvent or KindDLQ
	From    string
	To      string
	Index   string
	Node    string
	Verb    string
	Event   string
}

// EdgeID is the edge id of an edge subject: "from.to" or "from.to.n".
func (s Subject) EdgeID() string {
	if s.Kind != KindEdge {
		return ""
	}
	if s.Index != "" {
		return s.From + "." + s.To + "." + s.Index
	}
	return s.From + "." + s.To
}

// ErrNotSwitchyard is returned for subjects outside the layout.
var ErrNotSwitchyard = errors.New("broker: not a switchyard subject")

// ParseSubject parses a subject of the layout; anything else, wildcards
// included, is ErrNotSwitchyard. For every subject it accepts,
// Subject.String gives the same subject back.
func ParseSubject(subj string) (Subject, error) {
	parts := strings.Split(subj, ".")
	if len(parts) < 3 || parts[0] != root || !ValidToken(parts[1]) {
		return Subject{}, ErrNotSwitchyard
	}
	s := Subject{Session: parts[1], Kind: parts[2]}
	rest := parts[3:]
	switch s.Kind {
	case KindEdge:
		if (len(rest) != 2 && len(rest) != 3) || !ValidToken(rest[0]) || !ValidToken(rest[1]) {
			return Subject{}, ErrNotSwitchyard
		}
		s.From, s.To = rest[0], rest[1]
		if len(rest) == 3 {
			if rest[2] == "" || strings.Trim(rest[2], "0123456789") != "" {
				return Subject{}, ErrNotSwitchyard
			}
			s.Index = rest[2]
		}
	case KindNode:
		if len(rest) != 2 || rest[1] != "in" || !ValidToken(rest[0]) {
			return Subject{}, ErrNotSwitchyard
		}
		s.Node = rest[0]
	case KindControl:
		if len(rest) != 1 || !ValidToken(rest[0]) {
			return Subject{}, ErrNotSwitchyard
		}
		s.Verb = rest[0]
	case KindEvent:
		if len(rest) == 0 {
			return Subject{}, ErrNotSwitchyard
		}
		for _, p := range rest {
			if !ValidToken(p) {
				return Subject{}, ErrNotSwitchyard
			}
		}
		s.Event = strings.Join(rest, ".")
	case KindDLQ:
		if len(rest) != 0 {
			return Subject{}, ErrNotSwitchyard
		}
	default:
		return Subject{}, ErrNotSwitchyard
	}
	return s, nil
}

// String builds the subject back.
func (s Subject) String() string {
	switch s.Kind {
	case KindEdge:
		return Edge(s.Session, s.EdgeID())
	case KindNode:
		return NodeIn(s.Session, s.Node)
	case KindControl:
		return Control(s.Session, s.Verb)
	case KindEvent:
		return Event(s.Session, s.Event)
	case KindDLQ:
		return DeadLetter(s.Session)
	}
	return ""
}
