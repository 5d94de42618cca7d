package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/nodes"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

// The security tests play a hostile outside client with nothing but the
// outside credential of a listening server (docs/security.md).

const (
	outsideToken = "outside-token"
	adminToken   = "admin-token"
)

// recorder is a handler that records what each node was given.
type recorder struct {
	mu       sync.Mutex
	inputs   map[string][]nodes.Message
	contexts map[string][]map[string]string
	fired    chan string
}

func newRecorder() *recorder {
	return &recorder{inputs: map[string][]nodes.Message{}, contexts: map[string][]map[string]string{}, fired: make(chan string, 1024)}
}

func (rc *recorder) handler() nodes.Handler {
	return nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
		rc.mu.Lock()
		rc.inputs[in.Node.ID] = append(rc.inputs[in.Node.ID], in.Messages...)
		ctx2 := make(map[string]string, len(in.Context))
		for k, v := range in.Context {
			ctx2[k] = v
		}
		rc.contexts[in.Node.ID] = append(rc.contexts[in.Node.ID], ctx2)
		rc.mu.Unlock()
		rc.fired <- in.Node.ID
		return &nodes.Outcome{Status: nodes.StatusSuccess, Response: "from " + in.Node.ID}, nil
	})
}

// messages is what node was given so far.
func (rc *recorder) messages(node string) []nodes.Message {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]nodes.Message(nil), rc.inputs[node]...)
}

// waitFired waits until node has fired n times in all.
func (rc *recorder) waitFired(t *testing.T, node string, n int) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for len(rc.messages(node)) < n {
		select {
		case <-rc.fired:
		case <-deadline:
			t.Fatalf("%s fired %d times, want %d", node, len(rc.messages(node)), n)
		}
	}
}

// secure starts src as a durable session with id on a listening broker;
// every node of type custom.echo records its inputs.
func secure(t *testing.T, id, src string) (*run, *session.Session, *recorder) {
	t.Helper()
	r := &run{t: t, broker: brokertest.Start(t, brokertest.Listen(outsideToken, adminToken)), logs: t.TempDir()}
	rc := newRecorder()
	r.reg = func(reg *nodes.Registry) {
		require.NoError(t, reg.Register(nodes.Info{Type: "custom.echo", Handler: rc.handler()}))
	}
	cfg := r.config(r.load(src))
	cfg.ID, cfg.Durable, cfg.WorkDir = id, true, t.TempDir()
	s, err := session.Start(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	return r, s, rc
}

// outside connects to the broker's listener with the outside token;
// denials and other asynchronous errors go to the returned channel.
func outside(t *testing.T, b *broker.Broker, opts ...nats.Option) (*nats.Conn, <-chan error) {
	t.Helper()
	errs := make(chan error, 256)
	opts = append([]nats.Option{nats.Token(outsideToken), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case errs <- err:
		default:
		}
	})}, opts...)
	nc, err := nats.Connect(b.ClientURL(), opts...)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc, errs
}

// TestOutsideCannotReadReplies: while a durable session runs (its own
// JetStream API, KV and consumer traffic), an admin asks the session a
// question and another outside client publishes with acknowledgements, a
// client with the outside token subscribes to every subject its role
// allows, and tries the rest: it gets events, and nothing else.
func TestOutsideCannotReadReplies(t *testing.T) {
	src := `digraph s { kind="session"; a [type="custom.echo"]; b [type="custom.echo"]; a -> b }`
	r, s, rc := secure(t, "priv", src)

	// The spy: every subject its role allows (events, its own inbox), and
	// the ones it must be refused.
	spy, denied := outside(t, r.broker, broker.PrivateInbox("spy_")...)
	got := make(chan *nats.Msg, 4096)
	for _, subj := range []string{"sy.*.evt.>", "sy.*.json.evt.>", spy.Opts.InboxPrefix + ".>"} {
		_, err := spy.ChanSubscribe(subj, got)
		require.NoError(t, err)
	}
	refused := []string{">", "_INBOX.>", "_INBOX.*.>", "_INBOX.*", broker.RuntimeInboxPrefix + ".>", "$JS.>", "$JS.API.>",
		"$KV.>", "$O.>", "sy.>", "sy.*.edge.>", "sy.*.node.*.in", "sy.*.ctl.>", "sy.priv.dlq", "switchyard.sessions"}
	for _, subj := range refused {
		_, err := spy.ChanSubscribe(subj, got)
		require.NoError(t, err) // refused asynchronously
	}
	require.NoError(t, spy.Flush())
	want := map[string]bool{}
	for _, subj := range refused {
		want[subj] = true
	}
	deadline := time.After(20 * time.Second)
	for len(want) > 0 {
		select {
		case err := <-denied:
			require.True(t, errors.Is(err, nats.ErrPermissionViolation), "got %v", err)
			for subj := range want {
				if strings.Contains(err.Error(), `Subscription to "`+subj+`"`) {
					delete(want, subj)
				}
			}
		case <-deadline:
			t.Fatalf("subscriptions not refused: %v", want)
		}
	}
	// A client without a private inbox name has no inbox at all.
	plain, plainDenied := outside(t, r.broker)
	_, err := plain.ChanSubscribe("_INBOX.>", got)
	require.NoError(t, err)
	require.NoError(t, plain.Flush())
	select {
	case err := <-plainDenied:
		require.Contains(t, err.Error(), `Subscription to "_INBOX.>"`)
	case <-time.After(20 * time.Second):
		t.Fatal("_INBOX.> was not refused")
	}

	// The victims: an admin asks the session (request/reply on a control
	// subject), and another outside client publishes with JetStream
	// acknowledgements (request/reply with the server) on its private inbox.
	admin, err := nats.Connect(r.broker.ClientURL(), append(broker.PrivateInbox("admin_"), nats.Token(adminToken))...)
	require.NoError(t, err)
	defer admin.Close()
	reply, err := admin.Request(broker.Control(s.ID(), "explain"), []byte(`{"node":"b"}`), 10*time.Second)
	require.NoError(t, err)
	require.NotEmpty(t, reply.Data)

	victim, victimErrs := outside(t, r.broker, broker.PrivateInbox("victim_")...)
	js, err := jetstream.New(victim)
	require.NoError(t, err)
	for i, text := range []string{"secret one", "secret two"} {
		data, err := proto.Marshal(&pb.Envelope{Id: "victim-" + text, Payload: &pb.Payload{Message: text}})
		require.NoError(t, err)
		ack, err := js.Publish(ctx20(t), broker.NodeIn(s.ID(), "a"), data, jetstream.WithMsgID("victim-"+text))
		require.NoError(t, err, "an outside client gets its publish acknowledgement")
		require.Equal(t, broker.StreamName(s.ID()), ack.Stream)
		rc.waitFired(t, "b", i+1)
	}
	// Request/reply with the session itself (explain, allowed to outside
	// clients) answers on the private inbox.
	reply, err = victim.Request(broker.Control(s.ID(), "explain"), []byte(`{"node":"a"}`), 10*time.Second)
	require.NoError(t, err)
	require.Contains(t, string(reply.Data), `"node":"a"`)
	select {
	case err := <-victimErrs:
		t.Fatalf("the victim was refused: %v", err)
	default:
	}
	reply, err = admin.Request(broker.Control(s.ID(), "explain"), []byte(`{"node":"a"}`), 10*time.Second)
	require.NoError(t, err)

	// Everything the spy received is an event of the session; none of it
	// is a reply, a KV entry (graph.dot), an envelope or an acknowledgement.
	// The session publishes its events on its own connection, after the
	// firings: wait for the first one to reach the spy. The replies and
	// acknowledgements were routed before the spy's flush returns.
	require.NoError(t, spy.Flush())
	require.NoError(t, admin.Flush())
	n := 0
	check := func(m *nats.Msg) {
		n++
		require.True(t, strings.HasPrefix(m.Subject, "sy.priv.evt.") || strings.HasPrefix(m.Subject, "sy.priv.json.evt."),
			"the spy received %s: %q", m.Subject, m.Data)
		require.NotContains(t, string(m.Data), "digraph", "graph.dot leaked on %s", m.Subject)
	}
	select {
	case m := <-got:
		check(m)
	case <-time.After(20 * time.Second):
		t.Fatal("the spy read no event of the session")
	}
	for {
		select {
		case m := <-got:
			check(m)
			continue
		default:
		}
		break
	}
	require.Positive(t, n, "the spy does read events")
}

func ctx20(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// count is how many events of kind the session emitted so far.
func (r *run) count(kind string) int { return r.kinds()[kind] }

// waitCount waits until the session emitted n events of kind.
func (r *run) waitCount(kind string, n int) {
	r.t.Helper()
	require.Eventually(r.t, func() bool { return r.count(kind) >= n }, 20*time.Second, 5*time.Millisecond,
		"want %d %s events", n, kind)
}

// TestOutsideArtifactsStayInTheSession: artifact names that are paths and
// references outside the session's own object store are refused on
// arrival (envelope.rejected, dead letter) and the node does not fire; an
// artifact of the session's store with a file name is delivered.
func TestOutsideArtifactsStayInTheSession(t *testing.T) {
	r, s, rc := secure(t, "arts", `digraph s { kind="session"; a [type="custom.echo"] }`)
	js := r.broker.JetStream()
	own, err := broker.PutArtifact(ctx20(t), js, "arts", "a/1/response.md", "response", []byte("own data"), broker.FileStorage)
	require.NoError(t, err)
	other, err := broker.PutArtifact(ctx20(t), js, "other", "b/1/secret.md", "response", []byte("other session's secret"), broker.FileStorage)
	require.NoError(t, err)

	dlq, err := r.broker.Conn().SubscribeSync(broker.DeadLetter(s.ID()))
	require.NoError(t, err)
	require.NoError(t, r.broker.Conn().Flush())
	spy, _ := outside(t, r.broker)
	target := filepath.Join(t.TempDir(), "pwned")
	hostile := []struct{ name, ref string }{
		{"../../../../../../../../.." + target, own.Ref},
		{target, own.Ref},
		{"sub/notes.md", own.Ref},
		{"..", own.Ref},
		{`..\..\notes.md`, own.Ref},
		{"notes.md", other.Ref},
		{"notes.md", "obj://sy_obj_arts/../sy_obj_other/b/1/secret.md"},
		{"notes.md", "obj://sy_obj_arts/a/../../x"},
		{"notes.md", "obj://sy_obj_arts//etc/passwd"},
		{"notes.md", "file://" + target},
		{"notes.md", "/etc/passwd"},
		{"notes.md", ""},
	}
	for i, h := range hostile {
		data, err := json.Marshal(map[string]any{"id": fmt.Sprint("hostile-", i), "payload": map[string]any{
			"message": "take this", "artifacts": []map[string]any{{"type": "file", "name": h.name, "ref": h.ref}}}})
		require.NoError(t, err)
		require.NoError(t, spy.Publish(broker.NodeIn(s.ID(), "a"), data))
		require.NoError(t, spy.Flush())
		r.waitCount("envelope.rejected", i+1)
		m, err := dlq.NextMsg(20 * time.Second)
		require.NoError(t, err, "case %d goes to the dead letters", i)
		require.Equal(t, data, m.Data)
	}
	r.mu.Lock()
	for _, ev := range r.events {
		if ev.Kind == "envelope.rejected" {
			require.Contains(t, ev.Message, "artifact")
		}
	}
	r.mu.Unlock()
	_, err = os.Stat(target)
	require.True(t, os.IsNotExist(err), "nothing was written outside the run directory: %v", err)

	// A file name and an object of the session's own store: delivered.
	data, err := json.Marshal(map[string]any{"id": "fine", "payload": map[string]any{"message": "take this",
		"artifacts": []map[string]any{{"type": "file", "name": "notes.md", "ref": own.Ref, "sha256": own.Sha256}}}})
	require.NoError(t, err)
	require.NoError(t, spy.Publish(broker.NodeIn(s.ID(), "a"), data))
	rc.waitFired(t, "a", 1)
	msgs := rc.messages("a")
	require.Len(t, msgs, 1, "no refused envelope fired the node")
	require.Len(t, msgs[0].Artifacts, 1)
	a := msgs[0].Artifacts[0]
	require.Equal(t, "notes.md", a.Name)
	require.Equal(t, filepath.Join(r.logs, "a", "inputs", "a", "1", "response.md"), a.Path)
	got, err := os.ReadFile(a.Path)
	require.NoError(t, err)
	require.Equal(t, "own data", string(got))
}

// TestOutsideCannotPreemptOutputs: before any node fires, an outside
// client publishes on every edge envelopes with the ids the runtime's
// outputs would have had (<session>.<node>.<firing>.<edge>), in the body
// and in Nats-Msg-Id, in the body only, and with guessed signatures. Its
// envelopes are delivered (publishing on edges from outside works), and
// every real output is still delivered exactly once.
func TestOutsideCannotPreemptOutputs(t *testing.T) {
	r, s, rc := secure(t, "pre", `digraph s { kind="session"; stall_after=0
		a [type="custom.echo"]; b [type="custom.echo"]; c [type="custom.echo"]; d [type="custom.echo"]
		a -> b; a -> c; b -> d }`)
	spy, _ := outside(t, r.broker)
	forged := 0
	for firing := 1; firing <= 6; firing++ {
		for _, e := range [][2]string{{"a", "b"}, {"a", "c"}, {"b", "d"}} {
			base := fmt.Sprintf("%s.%s.%d.%s.%s", s.ID(), e[0], firing, e[0], e[1])
			for i, id := range []string{base, base + "~0000000000000000", base + "~" + strings.Repeat("f", 16)} {
				data, err := proto.Marshal(&pb.Envelope{Id: id, FromNode: e[0], Kind: "handoff",
					EdgeId: e[0] + "." + e[1], Payload: &pb.Payload{Message: "forged"}})
				require.NoError(t, err)
				for _, hdr := range []string{id, fmt.Sprint("other-", firing, e, i)} { // in Nats-Msg-Id too, or in the body only
					m := nats.NewMsg(broker.Edge(s.ID(), e[0]+"."+e[1]))
					m.Data = data
					m.Header.Set(nats.MsgIdHdr, hdr)
					require.NoError(t, spy.PublishMsg(m))
				}
				forged++
			}
		}
	}
	require.NoError(t, spy.Flush())

	// The forgeries arrive first (the body-only copies are duplicates of
	// the same ids); then a fires three times.
	r.waitCount("envelope.duplicate", forged)
	admin, err := r.broker.NewConn()
	require.NoError(t, err)
	defer admin.Close()
	for i := 0; i < 3; i++ {
		data, err := proto.Marshal(&pb.Envelope{Id: fmt.Sprint("go-", i), Payload: &pb.Payload{Message: "go"}})
		require.NoError(t, err)
		require.NoError(t, admin.Publish(broker.NodeIn(s.ID(), "a"), data))
	}
	require.NoError(t, admin.Flush())

	real := func(node, from string) int {
		n := 0
		for _, m := range rc.messages(node) {
			if m.Text == "from "+from {
				n++
			}
		}
		return n
	}
	require.Eventually(t, func() bool { return real("b", "a") >= 3 && real("c", "a") >= 3 && real("d", "b") >= 3 },
		20*time.Second, 5*time.Millisecond, "b %d, c %d, d %d real inputs; %v", real("b", "a"), real("c", "a"), real("d", "b"), r.kinds())
	// d also hears of b's firings on the forgeries; the forgeries on b.d
	// were delivered to d as well.
	require.Equal(t, 3, real("b", "a"), "a's outputs to b, each once")
	require.Equal(t, 3, real("c", "a"), "a's outputs to c, each once")
	forgedAt := func(node string) int {
		n := 0
		for _, m := range rc.messages(node) {
			if m.Text == "forged" {
				n++
			}
		}
		return n
	}
	require.Equal(t, 18, forgedAt("b"), "outside envelopes on a -> b are delivered")
	require.Equal(t, 18, forgedAt("c"))
	require.Eventually(t, func() bool { return real("d", "b") >= 3+18 }, 20*time.Second, 5*time.Millisecond,
		"every firing of b reaches d: %d", real("d", "b"))
	require.Equal(t, 18, forgedAt("d"), "outside envelopes on b -> d are delivered")
	for _, m := range rc.messages("b") {
		if m.Text == "from a" {
			require.Regexp(t, `^pre\.a\.\d+\.a\.b~[0-9a-f]{16}$`, m.ID, "the runtime's ids are signed")
		}
	}
}

// TestOutsideTextStaysData: an outside envelope whose text is shell code
// reaches a tool node as data (SWITCHYARD_INPUT), never as a command.
func TestOutsideTextStaysData(t *testing.T) {
	r, s, _ := secure(t, "tool", `digraph s { kind="session"
		t [type="tool", tool_command="printf '%s' \"$SWITCHYARD_INPUT\""] }`)
	spy, _ := outside(t, r.broker)
	work := t.TempDir()
	attack := fmt.Sprintf("$(touch %s/a) `touch %s/b`; touch %s/c", work, work, work)
	data, err := json.Marshal(map[string]any{"id": "shell", "payload": map[string]any{"message": attack}})
	require.NoError(t, err)
	require.NoError(t, spy.Publish(broker.NodeIn(s.ID(), "t"), data))
	r.waitCount("node.completed", 1)
	ev := r.event("node.completed", "t")
	require.Equal(t, "success", ev.Status, ev.Message)
	require.Equal(t, attack, r.file("t", "stdout.txt"))
	entries, err := os.ReadDir(work)
	require.NoError(t, err)
	require.Empty(t, entries, "the text ran as a command")
}

// TestOutsideCannotActThroughReplies: an outside client may not publish on
// control subjects, so it names one as the reply subject of what it may
// publish — an explain request, an envelope for the session's stream, an
// envelope for a node the session does not have — hoping the runtime or
// the server answers there on its behalf. Nothing acts on those answers:
// the manual node does not fire.
func TestOutsideCannotActThroughReplies(t *testing.T) {
	r, s, rc := secure(t, "deputy", `digraph s { kind="session"; a [type="custom.echo"]; m [type="custom.echo", trigger=manual]; a -> m }`)
	spy, _ := outside(t, r.broker, broker.PrivateInbox("spy_")...)
	trigger := broker.Control(s.ID(), "trigger")
	data, err := proto.Marshal(&pb.Envelope{Id: "x1", Payload: &pb.Payload{Message: "x"}})
	require.NoError(t, err)
	for _, m := range []*nats.Msg{
		{Subject: broker.Control(s.ID(), "explain"), Reply: trigger, Data: []byte(`{"node":"m"}`)},
		{Subject: broker.Control(s.ID(), "explain"), Reply: trigger, Data: []byte(`m`)},
		{Subject: broker.NodeIn(s.ID(), "a"), Reply: trigger, Data: data},
		{Subject: broker.NodeIn(s.ID(), "nosuch"), Reply: trigger, Data: data},
		{Subject: broker.Edge(s.ID(), "a.m"), Reply: trigger, Data: data},
	} {
		require.NoError(t, spy.PublishMsg(m))
	}
	require.NoError(t, spy.Flush())
	rc.waitFired(t, "a", 1)
	// m holds a's output and waits for its (admin) trigger.
	r.waitCount("gate.waiting", 1)
	admin, err := nats.Connect(r.broker.ClientURL(), append(broker.PrivateInbox("admin_"), nats.Token(adminToken))...)
	require.NoError(t, err)
	defer admin.Close()
	reply, err := admin.Request(broker.Control(s.ID(), "explain"), []byte(`{"node":"m"}`), 10*time.Second)
	require.NoError(t, err)
	require.Contains(t, string(reply.Data), "manual")
	require.Empty(t, rc.messages("m"), "m fired without its trigger")
	// The admin's trigger works.
	_, err = admin.Request(trigger, []byte(`{"node":"m"}`), 10*time.Second)
	require.NoError(t, err)
	rc.waitFired(t, "m", 1)
}

// TestOutsideCannotSetEngineState: an outside envelope's run context keys
// internal.* (agent threads, retry counts, outcomes) and its parallel-branch
// tokens are dropped on arrival; its other context keys and the runtime's
// own envelopes keep theirs.
func TestOutsideCannotSetEngineState(t *testing.T) {
	r, s, rc := secure(t, "state", `digraph s { kind="session"; a [type="custom.echo"]; b [type="custom.echo"]; a -> b }`)
	spy, _ := outside(t, r.broker)
	data, err := json.Marshal(map[string]any{"id": "forged-state", "payload": map[string]any{"message": "hi"},
		"context":        []map[string]string{{"key": "internal.thread.a", "value": "someone-elses-session"}, {"key": "topic", "value": "ok"}},
		"contextUpdates": []map[string]string{{"key": "internal.outcome.gate", "value": "success"}},
		"branches":       []map[string]any{{"forkNode": "p", "branch": "b1", "forkId": "f1", "width": 1, "joinNode": "a"}}})
	require.NoError(t, err)
	require.NoError(t, spy.Publish(broker.NodeIn(s.ID(), "a"), data))
	rc.waitFired(t, "b", 1)

	rc.mu.Lock()
	defer rc.mu.Unlock()
	ctxA := rc.contexts["a"][0]
	require.Equal(t, "ok", ctxA["topic"], "outside context is input")
	require.NotContains(t, ctxA, "internal.thread.a")
	require.NotContains(t, ctxA, "internal.outcome.gate")
	require.Empty(t, rc.inputs["a"][0].Branch, "no branch token from outside")
	// a's own envelope to b keeps the engine's keys a's firing set.
	ctxB := rc.contexts["b"][0]
	require.Equal(t, "success", ctxB["internal.outcome.a"])
	require.Equal(t, "ok", ctxB["topic"])
	require.NotContains(t, ctxB, "internal.thread.a")
}
