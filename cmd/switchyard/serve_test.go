package main

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard/switchyard/internal/testio"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

type syncBuffer = testio.SyncBuffer

// waitLog waits, at most d, until log (a command's output) contains want.
func waitLog(t *testing.T, log *syncBuffer, want string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !strings.Contains(log.String(), want) {
		require.True(t, time.Now().Before(deadline), "no %q in:\n%s", want, log.String())
		time.Sleep(20 * time.Millisecond) // polling a command's output
	}
}

// natsCLI runs the standard nats CLI (natscli, pinned in tools/go.mod).
func natsCLI(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command("go", append([]string{"tool", "-modfile=../../tools/go.mod", "nats"}, args...)...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "nats %v: %s", args, out)
}

// eventWaiter collects the events an outside client receives.
type eventWaiter struct {
	t      *testing.T
	events chan *pb.Event
	seen   []*pb.Event
	used   map[uint64]bool
	log    *syncBuffer // the server's output, shown on failure
}

func watchEvents(t *testing.T, nc *nats.Conn, subject string, log *syncBuffer) *eventWaiter {
	t.Helper()
	w := &eventWaiter{t: t, events: make(chan *pb.Event, 10000), used: map[uint64]bool{}, log: log}
	_, err := nc.Subscribe(subject, func(m *nats.Msg) {
		ev := &pb.Event{}
		if proto.Unmarshal(m.Data, ev) == nil {
			w.events <- ev
		}
	})
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	return w
}

// wait returns the first event of kind (at node, unless "") that no
// earlier wait returned, in publication order, waiting up to 20s for it.
func (w *eventWaiter) wait(kind, node string) *pb.Event {
	w.t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		for _, ev := range w.seen {
			if !w.used[ev.Seq] && ev.Kind == kind && (node == "" || ev.Node == node) {
				w.used[ev.Seq] = true
				return ev
			}
		}
		select {
		case ev := <-w.events:
			w.seen = append(w.seen, ev)
		case <-timeout:
			w.t.Fatalf("no %s event for %q; the server said:\n%s", kind, node, w.log.String())
		}
	}
}

// count is how many events of kind (at node) arrived so far.
func (w *eventWaiter) count(kind, node string) int {
	for {
		select {
		case ev := <-w.events:
			w.seen = append(w.seen, ev)
			continue
		default:
		}
		break
	}
	n := 0
	for _, ev := range w.seen {
		if ev.Kind == kind && (node == "" || ev.Node == node) {
			n++
		}
	}
	return n
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// TestServe serves a reactive session on a listening embedded server and
// works with it from outside: the CLI, a nats.go client publishing JSON,
// a malformed envelope, a denied publish, and stop.
func TestServe(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "chat.dot")
	require.NoError(t, os.WriteFile(file, []byte(`digraph chat {
		a [prompt="answer the question"]
		b [prompt="summarise"]
		a -> b
	}`), 0o644))
	addr := freeAddr(t)
	url := "nats://" + addr
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- execute([]string{"serve", file, "--id", "s1", "--listen", addr, "--token", "out", "--admin-token", "adm",
			"--data", filepath.Join(dir, "data"), "--logs", filepath.Join(dir, "logs")}, &stdout, &stderr)
	}()
	// Wait until the session is listed.
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, out, _ := cli(t, "sessions", "--nats", url, "--token", "adm", "--timeout", "300ms")
		if code == 0 && bytes.Contains([]byte(out), []byte("s1")) {
			require.Contains(t, out, "running")
			break
		}
		require.True(t, time.Now().Before(deadline), "serve never listed its session: %s", stderr.String())
	}

	// switchyard watch follows the session with an outside credential.
	var watchOut, watchErr syncBuffer
	watchDone := make(chan int, 1)
	go func() {
		watchDone <- execute([]string{"watch", "s1", "--nats", url, "--token", "out", "--plain"}, &watchOut, &watchErr)
	}()

	// An outside client watches the events.
	watcher, err := nats.Connect(url, nats.Token("out"))
	require.NoError(t, err)
	defer watcher.Close()
	events := watchEvents(t, watcher, "sy.s1.evt.>", &stderr)
	wait := events.wait

	// switchyard pub with an outside credential.
	code, out, errOut := cli(t, "pub", "s1", "a", "what is NATS?", "--nats", url, "--token", "out", "--structured", `{"priority":1}`)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "published")
	wait("node.completed", "a")
	wait("node.completed", "b") // a broadcast to b

	// A file attached by the operator goes to the session's object store;
	// the node gets a checked copy in its stage directory.
	notes := filepath.Join(dir, "notes.txt")
	require.NoError(t, os.WriteFile(notes, []byte("see line 12"), 0o644))
	code, _, errOut = cli(t, "pub", "s1", "a", "with a file", "--file", notes, "--nats", url, "--token", "out")
	require.Equal(t, 1, code, "outside users cannot upload")
	require.Contains(t, errOut, "admin credential")
	code, out, errOut = cli(t, "pub", "s1", "a", "with a file", "--file", notes, "--nats", url, "--token", "adm")
	require.Equal(t, 0, code, errOut)
	envID := strings.Fields(out)[1]
	wait("node.completed", "a")
	wait("node.completed", "b")
	copied, err := os.ReadFile(filepath.Join(dir, "logs", "s1", "a", "inputs", "inbox", envID, "notes.txt"))
	require.NoError(t, err)
	require.Equal(t, "see line 12", string(copied))

	// A nats.go client publishes the JSON form on an edge.
	require.NoError(t, watcher.Publish("sy.s1.edge.a.b", []byte(`{"id":"ext-1","kind":"handoff","payload":{"message":"from outside"}}`)))
	ev := wait("node.completed", "b")
	require.Equal(t, "success", ev.Status)

	// The standard nats CLI publishes the JSON form with a Nats-Msg-Id
	// header, twice: the node receives it once (the session's stream
	// discards the repeat).
	for i := 0; i < 2; i++ {
		natsCLI(t, "--server", url, "--token", "out", "pub", "sy.s1.node.a.in",
			`{"kind":"handoff","payload":{"message":"from the nats CLI"}}`, "-H", "Nats-Msg-Id:cli-1")
	}
	wait("node.completed", "a")
	// The nats CLI asks the session with the outside credential, on the
	// private reply inbox its connection names (docs/security.md).
	natsCLI(t, "--server", url, "--token", "out", "--connection-name", "natscli_private_inbox_1",
		"--inbox-prefix", "_INBOX.natscli_private_inbox_1", "req", "sy.s1.ctl.explain", `{"node":"a"}`)

	// A malformed envelope is rejected with a reason; the session keeps working.
	require.NoError(t, watcher.Publish("sy.s1.node.a.in", []byte("{not json")))
	rej := wait("envelope.rejected", "")
	require.Contains(t, rej.Message, "bad JSON envelope")
	code, _, errOut = cli(t, "pub", "s1", "a", "still there?", "--nats", url, "--token", "out")
	require.Equal(t, 0, code, errOut)
	wait("node.completed", "a")
	// Three envelopes reached a, in order; a repeat of cli-1 would have
	// come before the last one.
	require.Equal(t, 4, events.count("node.completed", "a"))

	// Nothing is lost silently on the way in: an unknown node, edge or
	// session is refused with the reason.
	code, _, errOut = cli(t, "pub", "s1", "nosuchnode", "hello?", "--nats", url, "--token", "out")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "no node nosuchnode in session s1 (its nodes: a, b)")
	require.Contains(t, wait("envelope.rejected", "").Message, "no node nosuchnode")
	code, _, errOut = cli(t, "pub", "s1", "b", "hello?", "--edge", "a:nosuch", "--nats", url, "--token", "out")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "no edge a:nosuch in session s1 (its edges: a:b")
	wait("envelope.rejected", "")
	code, _, errOut = cli(t, "pub", "nosession", "a", "hello?", "--nats", url, "--token", "out", "--timeout", "500ms", "--retry-for", "3s")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "no session nosession on "+url)
	// A raw NATS publisher: the event, and the envelope on the session's
	// dead-letter subject (the admin reads it). (A request gets an error
	// reply from a session that is not durable: session tests; here the
	// durable session's stream acknowledges it.)
	admin, err := nats.Connect(url, nats.Token("adm"))
	require.NoError(t, err)
	defer admin.Close()
	dlq, err := admin.SubscribeSync("sy.s1.dlq")
	require.NoError(t, err)
	require.NoError(t, admin.Flush())
	require.NoError(t, watcher.Publish("sy.s1.node.ghost.in", []byte(`{"kind":"handoff","payload":{"message":"boo"}}`)))
	require.Contains(t, wait("envelope.rejected", "").Message, "no node ghost in session s1")
	dead, err := dlq.NextMsg(20 * time.Second)
	require.NoError(t, err)
	require.Contains(t, string(dead.Data), "boo")
	require.Equal(t, "sy.s1.node.ghost.in", dead.Header.Get("Switchyard-Subject"))

	// Outside users may not publish on control subjects.
	code, _, _ = cli(t, "stop", "s1", "--nats", url, "--token", "out", "--timeout", "300ms")
	require.Equal(t, 1, code)
	code, _, errOut = cli(t, "pub", "s1", "a", "x", "--nats", url)
	require.Equal(t, 1, code, "no credentials, no connection: %s", errOut)

	// The admin stops it; serve exits.
	code, _, errOut = cli(t, "stop", "s1", "--nats", url, "--token", "adm", "--timeout", "3s")
	require.Equal(t, 0, code, "%s\nserve said:\n%s", errOut, stderr.String())
	select {
	case code := <-done:
		require.Equal(t, 0, code, stderr.String())
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not exit after its session was stopped")
	}
	require.Contains(t, stderr.String(), "session s1 stopped")
	select {
	case code := <-watchDone:
		require.Equal(t, 0, code, watchErr.String())
	case <-time.After(20 * time.Second):
		t.Fatal("watch did not end when the session stopped")
	}
	// serve's own output is a live log for people (no --json).
	require.Regexp(t, `(?m)^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d s1  a +success `, stdout.String())
	require.Regexp(t, `(?m) s1  envelope.rejected: .*bad JSON envelope`, stdout.String())
	require.Contains(t, watchOut.String(), "node.completed  a  success")
	require.Contains(t, watchOut.String(), "envelope.rejected")
	require.Contains(t, watchOut.String(), "session.stopped")
}

// TestServeDuplicateWindowFlag: a window the server would not take is a
// usage error, before anything starts.
func TestServeDuplicateWindowFlag(t *testing.T) {
	for _, v := range []string{"50ms", "-1s"} {
		code, _, errOut := cli(t, "serve", "testdata/queue.dot", "--duplicate-window", v)
		require.Equal(t, 2, code, "%s: %s", v, errOut)
		require.Contains(t, errOut, "--duplicate-window "+v+": at least 100ms")
	}
}

// TestServeJournalKeepFlag: serve refuses to keep fewer journal records
// than a session needs.
func TestServeJournalKeepFlag(t *testing.T) {
	for _, v := range []string{"10", "-1"} {
		code, _, errOut := cli(t, "serve", "testdata/queue.dot", "--journal-keep", v)
		require.Equal(t, 2, code, "%s: %s", v, errOut)
		require.Contains(t, errOut, "--journal-keep "+v+": at least 64")
	}
}

// TestServeMaxHeldFlag: serve refuses a bound on held envelopes that
// leaves no room for a node's firings on their way to its journal.
func TestServeMaxHeldFlag(t *testing.T) {
	for _, v := range []string{"100", "0", "-1"} {
		code, _, errOut := cli(t, "serve", "testdata/queue.dot", "--max-held", v)
		require.Equal(t, 2, code, "%s: %s", v, errOut)
		require.Contains(t, errOut, "--max-held "+v+": at least 1024")
	}
}
