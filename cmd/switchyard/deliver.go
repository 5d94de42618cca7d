package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/session"
)

// delivery is what became of an envelope pub published.
type delivery struct {
	// Stream and Seq say where a durable session's stream stored it
	// (acknowledged); Duplicate that it had it already (same id).
	Stream    string
	Seq       uint64
	Duplicate bool
	// Served is whether a serving process took it (its verdict); Durable
	// whether that session keeps its envelopes in JetStream.
	Served  bool
	Durable bool
	// Attempts is how many times it was published (same message id).
	Attempts int
}

// verdictMsg is a serving session's verdict (actors.Verdict on the wire).
type verdictMsg struct {
	OK      bool   `json:"ok"`
	Error   string `json:"error"`
	Durable bool   `json:"durable"`
}

// pubAck is a JetStream publish acknowledgement, or its error — or the
// serving session's refusal (actors.Refusal: "ok":false, the reason as the
// error's description), when no stream stores the subject.
type pubAck struct {
	OK        *bool  `json:"ok"`
	Stream    string `json:"stream"`
	Seq       uint64 `json:"seq"`
	Duplicate bool   `json:"duplicate"`
	Error     *struct {
		Code        int    `json:"code"`
		Description string `json:"description"`
	} `json:"error"`
}

// errRefused is a session's refusal of an envelope.
type errRefused struct{ reason string }

func (e *errRefused) Error() string { return "refused: " + e.reason }

// deliver publishes msg (its Nats-Msg-Id set) as a JetStream publish — a
// request the session's stream acknowledges — and asks the serving
// session for its verdict. A durable session's envelope counts as
// delivered only once its stream acknowledged it: without that
// acknowledgement (a server restarting, a stream leader being elected) the
// same message is published again, the stream dropping a second copy by
// its id, until retryFor has passed. A session that is not durable has no
// stream: its verdict is the delivery. Nobody at all (no stream, no
// session) is an error once it lasts nobodyFor, or retryFor when that is
// shorter: a server just restarted does not know yet, for a moment, who
// listens where in its cluster, and a session whose work stream does not
// store its inboxes and edges (past broker.MaxListedSubjects) answers
// nothing while no process serves it — a failover, until another process
// takes the session over. waiting, when not nil, is called once nobody has
// answered for nobodyNotice. Each attempt waits up to wait.
func deliver(nc *nats.Conn, msg *nats.Msg, wait, retryFor time.Duration, waiting func()) (*delivery, error) {
	base := nc.NewInbox()
	replies := make(chan *nats.Msg, 16)
	sub, err := nc.ChanSubscribe(base+".*", replies)
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	msg.Reply = base + ".ack"
	msg.Header.Set(broker.VerdictHeader, base+".verdict")
	d := &delivery{}
	var lastErr string
	var nobodySince, silentSince time.Time
	deadline := time.Now().Add(retryFor)
	backoff := 100 * time.Millisecond
	for {
		d.Attempts++
		if err := nc.PublishMsg(msg); err != nil {
			return d, err
		}
		if err := nc.FlushTimeout(wait); err != nil && !broker.Transient(err) {
			return d, err
		}
		// Until anything answers, the same message is published again
		// every silentAttempt: a stream electing its leader answers nothing
		// to the publications it gets meanwhile.
		heard := false
		attempt := time.NewTimer(min(wait, silentAttempt))
	collect:
		for {
			select {
			case m := <-replies:
				if !heard {
					heard = true
					silentSince = time.Time{}
					attempt.Reset(wait)
				}
				switch m.Subject {
				case base + ".verdict":
					var v verdictMsg
					if err := json.Unmarshal(m.Data, &v); err != nil {
						attempt.Stop()
						return d, fmt.Errorf("bad verdict: %v", err)
					}
					if !v.OK {
						attempt.Stop()
						return d, &errRefused{reason: v.Error}
					}
					d.Served, d.Durable = true, v.Durable
					if v.Durable && d.Stream == "" {
						// Its stream acknowledges at once, or is electing
						// a leader: published again soon.
						attempt.Reset(silentAttempt)
					}
				case base + ".ack":
					if len(m.Data) == 0 && m.Header.Get("Status") == "503" {
						// No stream stores the subject and no session
						// listens on it (or the server does not know yet).
						if d.Served {
							continue
						}
						if nobodySince.IsZero() {
							nobodySince = time.Now()
						}
						if waiting != nil && time.Since(nobodySince) >= nobodyNotice {
							waiting()
							waiting = nil
						}
						if time.Since(nobodySince) >= min(nobodyFor, retryFor) {
							attempt.Stop()
							return d, errNobody
						}
						break collect
					}
					var a pubAck
					if err := json.Unmarshal(m.Data, &a); err != nil {
						continue // a verdict-style reply of a session that is not durable
					}
					if a.Error != nil && a.OK != nil && !*a.OK {
						attempt.Stop()
						return d, &errRefused{reason: a.Error.Description}
					}
					if a.Error != nil {
						lastErr = a.Error.Description // the stream cannot store it now: again
						break collect
					}
					if a.Stream != "" {
						d.Stream, d.Seq, d.Duplicate = a.Stream, a.Seq, a.Duplicate
					}
				}
				if d.Stream != "" && d.Served {
					attempt.Stop()
					return d, nil
				}
				if d.Served && !d.Durable {
					attempt.Stop()
					return d, nil
				}
			case <-attempt.C:
				break collect
			}
		}
		attempt.Stop()
		if d.Stream != "" {
			return d, nil // stored; no process serves the session now
		}
		if !heard {
			if silentSince.IsZero() {
				silentSince = time.Now().Add(-min(wait, silentAttempt))
			}
			if time.Since(silentSince) >= 2*wait && !d.Served && lastErr == "" && nobodySince.IsZero() {
				return d, errNobody // something listens, but nothing answers
			}
		}
		if time.Now().After(deadline) {
			if lastErr != "" {
				return d, fmt.Errorf("not acknowledged by the session's stream in %s: %s", retryFor, lastErr)
			}
			return d, fmt.Errorf("not acknowledged by the session's stream in %s", retryFor)
		}
		if heard {
			time.Sleep(backoff) // between attempts of a publish that was not acknowledged
			backoff = min(2*backoff, 2*time.Second)
		}
	}
}

// silentAttempt is how long a publication nothing answers waits before it
// is sent again.
const silentAttempt = time.Second

// nobodyFor is how long "no responders" must last before pub says that
// no session is there: longer than a takeover of a session whose owner
// went away takes (session.DefaultLeaseTTL, then the new owner's start).
const nobodyFor = session.DefaultLeaseTTL + 5*time.Second

// nobodyNotice is how long "no responders" lasts before pub says it waits.
const nobodyNotice = 2 * time.Second

// errNobody: no stream stored the envelope and no session took it.
var errNobody = fmt.Errorf("nobody took the envelope")
