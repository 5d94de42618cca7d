package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/internal/crash"
	"github.com/switchyard/switchyard/session"
)

// queueEvents is how many outside envelopes TestCrashQueueExactlyOnce and
// TestCrashQueueIntake send: 100,000 when SWITCHYARD_FULL=1 (what .ci/run
// sets), 2,000 by default, 500 with -short, or SWITCHYARD_QUEUE_EVENTS.
func queueEvents(t *testing.T) int {
	if n, err := strconv.Atoi(os.Getenv("SWITCHYARD_QUEUE_EVENTS")); err == nil && n > 1 {
		return n // a size of one's own
	}
	switch {
	case os.Getenv("SWITCHYARD_FULL") == "1":
		return 100_000
	case testing.Short():
		return 500
	}
	return 2_000
}

// TestCrashQueueExactlyOnce floods a served durable session with outside
// envelopes on a queue edge, acknowledged by its stream; the serve process
// (embedded server included) is killed with SIGKILL during the firings —
// at the commit of the firing halfway, and in the journal's batching: a
// batch of records published with no acknowledgement read yet, a batch
// acknowledged with no firing told yet, the node's firings of a batch
// settled with none of their inputs acknowledged, an input acknowledged, and the
// work stream just trimmed of what was consumed (2,000 events or more) — then
// served again from the same store, and the publisher sends again what was
// not acknowledged. Every envelope is stored once and fires the node
// exactly once.
func TestCrashQueueExactlyOnce(t *testing.T) {
	file, err := filepath.Abs("testdata/queue.dot")
	require.NoError(t, err)
	total := queueEvents(t)
	for _, point := range queuePoints(total) {
		t.Run(point, func(t *testing.T) { crashQueue(t, queueGraph{file: file}, total, point) })
	}
}

// TestCrashQueueIntake is TestCrashQueueExactlyOnce through the intake: the
// graph has broker.MaxListedSubjects idle nodes more, so its work stream
// does not list its inbound subjects; every outside envelope is checked by
// the serving process's intake and republished to the stream under its
// Stored subject, with the publisher's reply subject and Nats-Msg-Id (the
// acknowledgement the publisher reads is the stream's own). While no
// process serves, a publish gets no responders, and the publisher sends it
// again until it is acknowledged. Killed at the same points, and in the
// intake: an envelope decoded and kept, not republished (intake-kept), one
// just republished (intake-republished: perhaps still in the connection's
// buffer, perhaps stored and acknowledged), and at a delivery to the node,
// which takes the envelope the intake decoded (deliver).
func TestCrashQueueIntake(t *testing.T) {
	file := intakeQueueFile(t)
	total := queueEvents(t)
	points := append(queuePoints(total),
		"intake-kept:"+strconv.Itoa(total/2), "intake-republished:"+strconv.Itoa(total/3),
		// The delivery that takes the envelope the intake decoded.
		"deliver:"+strconv.Itoa(total/2))
	for _, point := range points {
		t.Run(point, func(t *testing.T) { crashQueue(t, queueGraph{file: file, intake: true}, total, point) })
	}
}

// intakeQueueFile is testdata/queue.dot with broker.MaxListedSubjects idle
// nodes more: its work stream stores the outside envelopes through the
// intake.
func intakeQueueFile(t *testing.T) string {
	src, err := os.ReadFile("testdata/queue.dot")
	require.NoError(t, err)
	var b strings.Builder
	b.WriteString(strings.TrimSuffix(strings.TrimSpace(string(src)), "}"))
	for i := range broker.MaxListedSubjects {
		fmt.Fprintf(&b, "    idle%d [shape=diamond]\n", i) // never fires: nothing reaches its inbox
	}
	b.WriteString("}\n")
	file := filepath.Join(t.TempDir(), "queue-intake.dot")
	require.NoError(t, os.WriteFile(file, []byte(b.String()), 0o644))
	return file
}

// TestCrashQueueModeSwitch floods a served durable session as
// TestCrashQueueExactlyOnce does and, halfway through, edits its
// graph live (`switchyard edit`) so that its work stream changes mode:
// from listing the queue edge to the intake (the edit adds
// broker.MaxListedSubjects idle nodes), and back (it removes them). The
// serve process is killed in the change (broker.SetInbound): with the
// stream storing both kinds of subject and the session's mode not switched
// yet (inbound-both), with the mode switched and the stream still storing
// both (inbound-switched), and with the stream storing the new mode's
// subjects only (inbound-set). The publisher goes on throughout, in
// whichever mode reaches the stream. Served again, the session resumes
// its last journaled graph, the edit is applied again, and what was not
// acknowledged is sent again: every envelope is stored once and fires the
// node exactly once, and the stream is left in the edited graph's mode.
func TestCrashQueueModeSwitch(t *testing.T) {
	listed, err := filepath.Abs("testdata/queue.dot")
	require.NoError(t, err)
	intake := intakeQueueFile(t)
	// Fewer envelopes than the other crash-queue tests with
	// SWITCHYARD_FULL: the kill comes halfway, and they
	// run the 100,000 already.
	total := min(queueEvents(t), 10_000)
	for _, dir := range []struct {
		name     string
		from, to string
		toIntake bool
	}{
		{"to-intake", listed, intake, true},
		{"to-listed", intake, listed, false},
	} {
		for _, point := range []string{"inbound-both:1", "inbound-switched:1", "inbound-set:1"} {
			t.Run(dir.name+"/"+point, func(t *testing.T) {
				crashQueue(t, queueGraph{file: dir.from, intake: dir.toIntake, edit: dir.to}, total, point)
			})
		}
	}
}

// queuePoints are the kill points of the crash-queue tests for total
// outside envelopes.
func queuePoints(total int) []string {
	points := []string{
		"after-commit:" + strconv.Itoa(total/2),
		// A batch holds what queued up during the last write: hundreds of
		// records in a flood, so these land well inside it.
		"batch-published:" + strconv.Itoa(max(5, total/1000)), "batch-acked:" + strconv.Itoa(max(7, total/1000+2)),
		// The node's firings of a batch settled together: outputs out,
		// inputs not acknowledged. Records of several batches settle
		// together while the node's io goroutine is busy: fewer than the
		// batches (20,000 envelopes: under 21).
		"settled:" + strconv.Itoa(max(3, total/2000)),
		"after-ack:" + strconv.Itoa(total/3),
	}
	if total >= 1500 {
		// The work stream purged below the consumer's acknowledgement
		// floor: the first trim, after 1,024 records (-short has fewer).
		points = append(points, "after-trim:1")
	}
	return points
}

// queueGraph is the session a crash-queue test serves as q1: its file, in
// which outside envelopes arrive on the queue edge src -> work, and whether
// its work stream stores them through the intake (more inbound subjects
// than broker.MaxListedSubjects) rather than listing the edge.
type queueGraph struct {
	file   string
	intake bool
	// edit, when set, is a graph applied live (`switchyard edit`) once
	// half the envelopes are sent, by the first process (killed in
	// it) and again by the second; intake is then the edited graph's mode.
	edit string
}

func crashQueue(t *testing.T, g queueGraph, total int, point string) {
	dir := t.TempDir()
	addr := freeAddr(t)
	url := "nats://" + addr
	var logs syncBuffer
	// The work stream keeps what was consumed for its duplicate window, so
	// that the envelopes whose acknowledgements the kill lost are dropped
	// when the publisher sends them again. The first trim that purges
	// anything comes a window after the first envelope: for that point the
	// window is shorter than the default 2 minutes, and still longer than
	// the second process takes to start.
	window := broker.DefaultDuplicateWindow
	if strings.HasPrefix(point, "after-trim") {
		window = 15 * time.Second
	}
	serve := func(point string) chan error {
		cmd := exec.Command(switchyardBinary(t), "serve", g.file, "--id", "q1", "--data", "data", "--logs", "logs",
			"--listen", addr, "--token", "out", "--admin-token", "adm", "--duplicate-window", window.String(),
			"--journal-keep", strconv.Itoa(watchKeep))
		cmd.Dir = dir
		cmd.Stderr = &logs
		cmd.Env = os.Environ()
		if point != "" {
			cmd.Env = append(cmd.Env, crash.Env+"="+point)
		}
		require.NoError(t, cmd.Start())
		done, exited := make(chan error, 1), make(chan struct{})
		go func() { done <- cmd.Wait(); close(exited) }()
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
		return done
	}
	acked := make([]bool, total)
	// editing is the live edit of the first process, running beside the
	// publisher (g.edit): started once, its exit reported.
	var editing chan error
	// edit runs the live edit. The stream stores (and acknowledges) the envelopes as soon as the
	// serving process made it, a little before the session answers its
	// control subjects: an edit sent in between finds no responders (a
	// clean-clone CI run under load had half its envelopes sent by then)
	// and is sent again, as a user would; any other failure ends it.
	edit := func() error {
		for deadline := time.Now().Add(time.Minute); ; {
			_, out, err := child(t, dir, "", "edit", "q1", g.edit, "--nats", url, "--token", "adm")
			if err == nil {
				return nil
			}
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			if !bytes.Contains(stderr, []byte("no responders")) || time.Now().After(deadline) {
				return fmt.Errorf("%v: %s%s", err, out, stderr)
			}
			time.Sleep(100 * time.Millisecond) // a retry's pace, not a synchronisation
		}
	}
	// publish sends every envelope not acknowledged yet, 512 in flight,
	// until the server goes away or refuses one (no responders: no
	// process serves the session's intake yet); it returns how many are
	// acknowledged.
	publish := func(b *broker.Broker) int {
		js := b.JetStream()
		type inflight struct {
			i int
			f jetstream.PubAckFuture
		}
		var window []inflight
		drain := func(keep int) bool {
			for len(window) > keep {
				w := window[0]
				window = window[1:]
				select {
				case <-w.f.Ok():
					acked[w.i] = true
				case <-w.f.Err():
					return false
				case <-time.After(10 * time.Second):
					return false
				}
			}
			return true
		}
		ok := true
		for i := 0; i < total && ok; i++ {
			if acked[i] {
				continue
			}
			id := "ev" + strconv.Itoa(i)
			f, err := js.PublishAsync("sy.q1.edge.src.work", []byte(`{"kind":"handoff","payload":{"message":"`+id+`"}}`),
				jetstream.WithMsgID(id))
			if err != nil {
				break
			}
			window = append(window, inflight{i, f})
			if g.edit != "" && editing == nil && i >= total/2 {
				editing = make(chan error, 1)
				go func() { editing <- edit() }()
			}
			ok = drain(512)
		}
		if ok {
			drain(0)
		}
		n := 0
		for _, a := range acked {
			if a {
				n++
			}
		}
		return n
	}
	visits := func(b *broker.Broker) (int, *session.Checkpoint) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cp, err := session.LoadCheckpoint(ctx, b, "q1", 0)
		if err != nil {
			return 0, nil
		}
		return cp.NodeVisits["work"], cp
	}

	// The journal as it is stored, read by the test across both processes:
	// the journal keeps only its last records, so its history alone cannot
	// show each of 100,000 envelopes consumed once.
	watch := newJournalWatch("q1")

	// First process: killed at the point. A batch holds what queued up
	// during the last write, so how many batches a flood makes depends on
	// the machine's speed: a loaded one writes 2,000 records in fewer
	// than seven; and the first trim purges nothing until a duplicate
	// window has passed. When every envelope fired and the point was not
	// reached, another wave of envelopes follows, until it is.
	start := time.Now()
	done := serve(point)
	b := connectServe(t, url, done, 60*time.Second, &logs)
	unwatch := watch.follow(t, b)
	sent := publish(b)
	wave, waves := total, 1
	for deadline := time.After(10 * time.Minute); ; {
		var err error
		select {
		case err = <-done:
		case err := <-editing:
			// The kill point is in the edit's change of mode: an edit
			// that returns did not reach it.
			t.Fatalf("the live edit ended and serve was not killed at %s: %v\n%s", point, err, logs.String())
		case <-deadline:
			t.Fatal("serve was never killed")
		case <-time.After(500 * time.Millisecond): // poll the store
			if sent < total {
				// Refused while the session was not served yet (no
				// responders on an inbox the stream does not list).
				sent = publish(b)
				continue
			}
			if n, _ := visits(b); n < total {
				continue
			}
			waves++
			total += wave
			acked = append(acked, make([]bool, wave)...)
			sent = publish(b)
			continue
		}
		require.True(t, killed(err), "serve was not killed: %v\n%s", err, logs.String())
		break
	}
	unwatch()
	_ = b.Close()
	t.Logf("first process: %d of %d envelopes acknowledged before the kill, in %d waves of %d (another when every one fired before %s)", sent, total, waves, wave, point)
	if g.edit != "" {
		require.NotNil(t, editing, "killed at %s before the live edit began", point)
		require.Error(t, <-editing, "the live edit succeeded although its process was killed in it")
	}

	// Second process: the same store; what was not acknowledged is sent again.
	restart := time.Now()
	done = serve("")
	b = connectServe(t, url, done, 60*time.Second, &logs)
	defer b.Close()
	unwatch = watch.follow(t, b)
	defer unwatch()
	// What the kill left unacknowledged is sent first: past the window
	// the server would store it again, whatever the session does.
	up := time.Since(restart)
	t.Logf("second process up in %s (duplicate window %s)", up.Round(time.Millisecond), window)
	if g.edit != "" {
		// The killed edit was not journaled: the session resumed its
		// graph before it. Applied again, it changes the mode for good.
		require.NoError(t, edit())
	}
	// Through the intake, what is published before the session is
	// served again gets no responders: published again until acknowledged.
	for acks := publish(b); acks < total; acks = publish(b) {
		select {
		case err := <-done:
			t.Fatalf("serve exited: %v\n%s", err, logs.String())
		case <-time.After(100 * time.Millisecond): // the next round
		}
		require.Less(t, time.Since(restart), 2*time.Minute, "%d of %d envelopes acknowledged\n%s", acks, total, logs.String())
	}
	t.Logf("every envelope acknowledged %s after the restart", time.Since(restart).Round(time.Millisecond))
	var cp *session.Checkpoint
	fired := time.After(10 * time.Minute)
	for n := 0; n < total; {
		select {
		case err := <-done:
			t.Fatalf("serve exited: %v\n%s", err, logs.String())
		case <-fired:
			t.Fatalf("%d of %d envelopes fired after 10 minutes\n%s", n, total, logs.String())
		case <-time.After(500 * time.Millisecond): // poll the store
		}
		n, cp = visits(b)
		if n > total {
			// Not stopped here: the whole journal below names the
			// envelopes consumed twice and the records that did it.
			t.Errorf("%d firings of %d envelopes", n, total)
		}
	}
	elapsed := time.Since(start)

	// Stored once each: the stream holds one message per envelope.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	st, err := b.JetStream().Stream(ctx, broker.StreamName("q1"))
	require.NoError(t, err)
	info, err := st.Info(ctx)
	require.NoError(t, err)
	// (What was consumed is purged from the stream: its last sequence
	// counts what was ever stored.)
	require.EqualValues(t, total, info.State.LastSeq, "one stored message per envelope")
	if g.intake {
		// The stream lists no inbox or edge: the envelopes came through the intake.
		require.Equal(t, []string{broker.AllStored("q1")}, info.Config.Subjects, "the work stream stores what the intake republishes")
	} else {
		require.Contains(t, info.Config.Subjects, "sy.q1.edge.src.work", "the work stream lists the queue edge")
	}
	require.Empty(t, cp.Pending, "nothing left to consume")
	// Fired once each: the journal's records consume every id once.
	hist, err := session.History(ctx, b, "q1")
	require.NoError(t, err)
	consumed := make(map[string]int, total)
	firings := 0
	for _, h := range hist {
		if h.Node != "work" {
			continue
		}
		firings++
		for _, id := range h.ConsumedIDs {
			consumed[id]++
		}
	}
	// Every record the store held, compacted or not: each envelope
	// consumed by exactly one firing of work, none lost. Read first: when
	// an envelope was consumed twice, the records that did it are named.
	all := watch.upTo(t, cp.Seq, 2*time.Minute)
	byID := make(map[string]int, total)
	by := map[string][]string{} // id: the records that consumed it
	firings = 0
	for _, r := range all {
		if r.GetNode() != "work" {
			continue
		}
		firings++
		for _, id := range r.GetConsumed() {
			byID[id]++
			by[id] = append(by[id], fmt.Sprintf("record %d (firing %d, stream seqs %v)", r.GetSeq(), r.GetFiring(), r.GetConsumedSeqs()))
		}
	}
	twice := 0
	for id, n := range byID {
		if n > 1 {
			if twice++; twice <= 10 {
				t.Errorf("%s consumed %d times: %v", id, n, by[id])
			}
		}
	}
	require.Zero(t, twice, "envelopes consumed more than once over the whole journal (the first process acknowledged %d before the kill; the second was up in %s, duplicate window %s)", sent, up, window)
	if len(hist) > 0 && hist[0].Seq <= 1 {
		// The whole journal is there: every envelope consumed exactly once.
		require.Equal(t, total, firings)
		require.Len(t, consumed, total)
		for id, n := range consumed {
			require.Equal(t, 1, n, "%s consumed %d times", id, n)
		}
	}
	for id, n := range consumed {
		require.Equal(t, 1, n, "%s consumed %d times", id, n)
	}
	require.Equal(t, total, firings, "one firing of work per envelope over the whole journal")
	for i := 0; i < total; i++ {
		id := "ev" + strconv.Itoa(i)
		require.Equal(t, 1, byID[id], "%s consumed %d times over the whole journal", id, byID[id])
	}
	_, _, err = child(t, dir, "", "stop", "q1", "--nats", url, "--token", "adm")
	require.NoError(t, err)
	require.NoError(t, <-done)
	t.Logf("%d outside envelopes, SIGKILL at %s: each stored once and fired once; %s end to end (%.0f envelopes/s)",
		total, point, elapsed.Round(time.Second), float64(total)/elapsed.Seconds())
}
