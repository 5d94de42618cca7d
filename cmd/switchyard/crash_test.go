package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/internal/crash"
	"github.com/switchyard/switchyard/internal/testio"
	"github.com/switchyard/switchyard/session"
)

// The crash tests run switchyard as a child process, kill it with SIGKILL
// at a named point of the runtime (internal/crash), resume it with a new
// process and compare what the session did with an uninterrupted run.

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// switchyardBinary builds the CLI once per test binary.
func switchyardBinary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "switchyard-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "switchyard")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = errors.New(string(out))
		}
	})
	require.NoError(t, binErr)
	return binPath
}

// outcome is what a durable session did, read from its store.
type outcome struct {
	firings  []string       // node:firing:status of every committed firing, sorted
	consumed map[string]int // envelope id -> how many records consumed it
	produced map[string]int
	effects  map[string]int // side-effect line -> how many times it was written
	cp       *session.Checkpoint
}

func readOutcome(t *testing.T, dir, id string) *outcome {
	t.Helper()
	b := brokertest.Start(t, brokertest.Configure(func(c *broker.Config) { c.DataDir = filepath.Join(dir, "data") }))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hist, err := session.History(ctx, b, id)
	require.NoError(t, err)
	o := &outcome{consumed: map[string]int{}, produced: map[string]int{}, effects: map[string]int{}}
	for _, h := range hist {
		if h.Status != "" {
			o.firings = append(o.firings, h.Node+":"+strconv.FormatUint(h.Firing, 10)+":"+h.Status)
		}
		for _, c := range h.ConsumedIDs {
			o.consumed[unsigned(c)]++
		}
		for _, p := range h.ProducedIDs {
			o.produced[unsigned(p)]++
		}
	}
	sort.Strings(o.firings)
	o.cp, err = session.LoadCheckpoint(ctx, b, id, 0)
	require.NoError(t, err)
	require.NoError(t, b.Close())
	if data, err := os.ReadFile(filepath.Join(dir, "effects")); err == nil {
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			o.effects[line]++
		}
	}
	return o
}

// child runs the CLI with args in dir, the crash point armed when point is
// not empty.
func child(t *testing.T, dir, point string, args ...string) (*exec.Cmd, []byte, error) {
	t.Helper()
	cmd := exec.Command(switchyardBinary(t), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "EFFECTS="+filepath.Join(dir, "effects"))
	if point != "" {
		cmd.Env = append(cmd.Env, crash.Env+"="+point)
	}
	out, err := cmd.Output()
	return cmd, out, err
}

// connectServe connects as the admin to a serve child listening on url
// once it listens, failing the test when the child exits first (done
// yields its exit) or within passes; logs is the child's stderr.
func connectServe(t *testing.T, url string, done <-chan error, within time.Duration, logs *syncBuffer) *broker.Broker {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		cfg := broker.DefaultConfig()
		cfg.URL, cfg.Token = url, "adm"
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		b, err := broker.Start(ctx, cfg)
		cancel()
		if err == nil {
			return b
		}
		require.True(t, time.Now().Before(deadline), "serve never listened: %v\n%s", err, logs.String())
		select {
		case err := <-done:
			t.Fatalf("serve exited before it listened: %v\n%s", err, logs.String())
		case <-time.After(50 * time.Millisecond): // the next attempt: a refused connection returns at once
		}
	}
}

// runCrashPipeline runs testdata/crash.dot as session c1 in dir (--json),
// killed at point when it is not empty.
func runCrashPipeline(t *testing.T, dir, point string) ([]byte, error) {
	t.Helper()
	pipeline, err := filepath.Abs("testdata/crash.dot")
	require.NoError(t, err)
	_, out, err := child(t, dir, point, "run", pipeline, "--data", "data", "--logs", "logs", "--id", "c1", "--json")
	return out, err
}

// stderrOf is what a failed child wrote on stderr, for the failure message.
func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(ee.Stderr)
	}
	return ""
}

// killed reports whether err is the exit of a process killed by SIGKILL.
func killed(err error) bool { return testio.Killed(err) }

// lastEvent is the last JSON event a --json run printed.
func lastEvent(t *testing.T, out []byte) map[string]any {
	t.Helper()
	var last map[string]any
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev map[string]any
		if json.Unmarshal(sc.Bytes(), &ev) == nil {
			last = ev
		}
	}
	return last
}

// TestCrashPipeline kills a pipeline at 33 points of the runtime (between
// a commit and its publications, between publications, after an output
// was handed in process to its receiver, between publish
// and acknowledgement, in handlers, while a join waits, in the journal,
// while the completed session is archived) and resumes it: the committed firings, the envelopes consumed and
// produced, the iteration counts and the side effects equal those of an
// uninterrupted run; nothing is lost and nothing consumed twice.
func TestCrashPipeline(t *testing.T) {
	refDir := t.TempDir()
	out, err := runCrashPipeline(t, refDir, "")
	require.NoError(t, err, "the uninterrupted run: %s", stderrOf(err))
	require.Equal(t, "success", lastEvent(t, out)["status"])
	ref := readOutcome(t, refDir, "c1")
	require.Len(t, ref.firings, 11)

	points := []string{
		"deliver:1", "deliver:4", "deliver:9",
		"handler:2", "handler:5", "handler:8",
		"handler-done:3", "handler-done:6",
		"before-commit:2", "before-commit:7",
		"after-commit:1", "after-commit:4", "after-commit:9",
		"between-publish:1", "between-publish:2",
		// An output handed in process to its receiver (its firing's
		// record stored), before the firing's inputs are acknowledged.
		"handed:1", "handed:4", "handed:9",
		"after-publish:5", "after-publish:10",
		"after-ack:3", "after-ack:8",
		"join-wait:1", "join-wait:2",
		// Once per journal batch: 12 records, at least 10 batches (the
		// three branches' records may be written together).
		"after-record:6", "after-record:10",
		"before-snapshot:1",
		"batch-published:4", "batch-published:9",
		"batch-acked:3", "batch-acked:10",
		"archive-copied:1", "archive-marked:1",
	}
	var survived, lost, doubled, reruns int
	for _, p := range points {
		t.Run(p, func(t *testing.T) {
			dir := t.TempDir()
			_, err := runCrashPipeline(t, dir, p)
			require.True(t, killed(err), "the run was not killed at %s: %v\n%s", p, err, stderrOf(err))
			_, out, err := child(t, dir, "", "resume", "c1", "--data", "data", "--logs", "logs", "--json")
			require.NoError(t, err, "resume after %s; stderr:\n%s\nlast event: %v", p, stderrOf(err), lastEvent(t, out))
			last := lastEvent(t, out)
			require.Equal(t, "session.completed", last["kind"])
			require.Equal(t, "success", last["status"])

			got := readOutcome(t, dir, "c1")
			for id := range ref.consumed {
				if got.consumed[id] == 0 {
					lost++
				}
			}
			for _, n := range got.consumed {
				if n > 1 {
					doubled++
				}
			}
			require.Equal(t, ref.firings, got.firings, "committed firings")
			require.Equal(t, ref.consumed, got.consumed, "envelopes consumed, once each")
			require.Equal(t, ref.produced, got.produced, "envelopes produced, once each")
			require.Equal(t, ref.cp.NodeVisits, got.cp.NodeVisits)
			require.Equal(t, ref.cp.Scheduler.Total, got.cp.Scheduler.Total, "iteration count")
			require.Equal(t, ref.cp.Scheduler.Iterations, got.cp.Scheduler.Iterations)
			require.Equal(t, "success", got.cp.Status)
			require.Empty(t, got.cp.Pending)
			// A handler cut short runs again with the same idempotency key:
			// the distinct side effects are the uninterrupted run's.
			require.Equal(t, keys(ref.effects), keys(got.effects))
			for _, n := range got.effects {
				reruns += n - 1
			}
			survived++
		})
	}
	t.Logf("pipeline: %d kills survived, %d envelopes lost, %d consumed twice, %d handler re-runs with a stable attempt id",
		survived, lost, doubled, reruns)
}

// TestCrashCreation kills `run --id` at every step of the session's
// creation (its stream and bucket created, its graph, its input and its
// record of itself written) and just after: either resume continues the
// session to the uninterrupted run's outcome, or nothing of it was
// recorded — resume says so and names run --id, the store then holds
// nothing of it, and run --id starts it afresh.
func TestCrashCreation(t *testing.T) {
	refDir := t.TempDir()
	_, err := runCrashPipeline(t, refDir, "")
	require.NoError(t, err, "the uninterrupted run: %s", stderrOf(err))
	ref := readOutcome(t, refDir, "c1")

	for _, tc := range []struct {
		point    string
		recorded bool
	}{
		// create-stream-early is a reactive session's (a pipeline makes
		// no work stream at its start): session's TestCreateStreamEarlyKilled.
		{"create-stream:1", false}, {"claim-key-sent:1", false}, {"lease-sent:1", false}, {"create-bucket:1", false}, {"create-graph:1", false},
		{"create-input:1", false}, {"create-meta:1", true}, {"deliver:1", true},
	} {
		t.Run(tc.point, func(t *testing.T) {
			dir := t.TempDir()
			_, err := runCrashPipeline(t, dir, tc.point)
			require.True(t, killed(err), "the run was not killed at %s: %v\n%s", tc.point, err, stderrOf(err))
			_, out, err := child(t, dir, "", "resume", "c1", "--data", "data", "--logs", "logs", "--json")
			if tc.recorded {
				require.NoError(t, err, "resume after %s; stderr:\n%s", tc.point, stderrOf(err))
				require.Equal(t, "success", lastEvent(t, out)["status"])
				got := readOutcome(t, dir, "c1")
				require.Equal(t, ref.firings, got.firings, "committed firings")
				require.Equal(t, ref.consumed, got.consumed, "envelopes consumed, once each")
				require.Equal(t, keys(ref.effects), keys(got.effects))
				return
			}
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee)
			require.Equal(t, 1, ee.ExitCode())
			require.Contains(t, string(ee.Stderr), "nothing of session c1 is recorded")
			require.Contains(t, string(ee.Stderr), "switchyard run FILE.dot --id c1")

			// The store holds nothing of it.
			b := brokertest.Start(t, brokertest.Configure(func(c *broker.Config) { c.DataDir = filepath.Join(dir, "data") }))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err = b.JetStream().KeyValue(ctx, broker.KVName("c1"))
			require.ErrorIs(t, err, jetstream.ErrBucketNotFound)
			_, err = b.JetStream().Stream(ctx, broker.StreamName("c1"))
			require.ErrorIs(t, err, jetstream.ErrStreamNotFound)
			stored, err := session.List(ctx, b)
			require.NoError(t, err)
			require.Empty(t, stored)
			require.NoError(t, b.Close())

			// And the way on works.
			out, err = runCrashPipeline(t, dir, "")
			require.NoError(t, err, "run --id after %s", tc.point)
			require.Equal(t, "success", lastEvent(t, out)["status"])
		})
	}
}

func keys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestCrashServe kills a served reactive session at 12 points while an
// outside client publishes a stream of 30 envelopes onto it (one kill lands
// while a debounce window holds envelopes), serves it again from the same
// store and publishes what was not accepted: every envelope is consumed
// exactly once by intake, and every envelope intake sent is consumed
// exactly once by digest (a firing, or superseded in its debounce window,
// on record).
func TestCrashServe(t *testing.T) {
	feed, err := filepath.Abs("testdata/feed.dot")
	require.NoError(t, err)
	const total = 30
	points := []string{"deliver:5", "deliver:20", "debounce-held:3", "handler:10", "after-commit:7", "handed:4", "handed:17",
		"after-ack:12", "after-record:15", "batch-published:6", "batch-acked:9", "settled:11"}
	var survived, lost, doubled int
	for _, p := range points {
		t.Run(p, func(t *testing.T) {
			dir := t.TempDir()
			addr := freeAddr(t)
			url := "nats://" + addr
			var logs syncBuffer
			serve := func(point string) (*exec.Cmd, chan error) {
				cmd := exec.Command(switchyardBinary(t), "serve", feed, "--id", "f1", "--data", "data", "--logs", "logs",
					"--listen", addr, "--token", "out", "--admin-token", "adm")
				cmd.Dir = dir
				cmd.Stderr = &logs
				cmd.Env = append(os.Environ(), "EFFECTS="+filepath.Join(dir, "effects"))
				if point != "" {
					cmd.Env = append(cmd.Env, crash.Env+"="+point)
				}
				require.NoError(t, cmd.Start())
				done, exited := make(chan error, 1), make(chan struct{})
				go func() { done <- cmd.Wait(); close(exited) }()
				t.Cleanup(func() {
					// A failed test leaves no process behind.
					_ = cmd.Process.Kill()
					<-exited
				})
				return cmd, done
			}
			publish := func(b *broker.Broker, from int) int {
				for i := from; i < total; i++ {
					id := "e" + strconv.Itoa(i)
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					_, err := b.JetStream().Publish(ctx, "sy.f1.node.intake.in",
						[]byte(`{"kind":"handoff","payload":{"message":"`+id+`"}}`), jetstreamMsgID(id))
					cancel()
					if err != nil {
						return i // the server went away: publish from here again
					}
				}
				return total
			}

			// First process: killed at the point while the stream comes in.
			_, done := serve(p)
			b := connectServe(t, url, done, 30*time.Second, &logs)
			next := publish(b, 0)
			select {
			case err := <-done:
				require.True(t, killed(err), "serve was not killed at %s: %v", p, err)
			case <-time.After(60 * time.Second):
				t.Fatalf("serve was never killed at %s", p)
			}
			_ = b.Close()

			// Second process: the same store; the session is resumed.
			cmd, done := serve("")
			b = connectServe(t, url, done, 30*time.Second, &logs)
			defer b.Close()
			if next > 0 {
				next-- // the last one may not have been accepted
			}
			require.Equal(t, total, publish(b, next))
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			complete := func() bool {
				hist, err := session.History(ctx, b, "f1")
				if err != nil {
					return false
				}
				byIntake, byDigest, sent := map[string]int{}, map[string]int{}, map[string]bool{}
				for _, h := range hist {
					for _, c := range h.ConsumedIDs {
						switch h.Node {
						case "intake":
							byIntake[c]++
						case "digest":
							byDigest[c]++
						}
					}
					if h.Node == "intake" {
						for _, id := range h.ProducedIDs {
							sent[id] = true
						}
					}
				}
				if len(byIntake) < total || len(byDigest) < len(sent) {
					return false
				}
				for id := range sent {
					if byDigest[id] == 0 {
						return false
					}
				}
				return true
			}
			for !complete() {
				select {
				case err := <-done:
					t.Fatalf("serve exited: %v\n%s", err, logs.String())
				case <-ctx.Done():
					t.Fatal("the stream was not fully consumed")
				case <-time.After(100 * time.Millisecond): // poll the store
				}
			}
			_, _, err := child(t, dir, "", "stop", "f1", "--nats", url, "--token", "adm")
			require.NoError(t, err)
			require.NoError(t, <-done)
			require.True(t, cmd.ProcessState.Success())

			got := readOutcome(t, dir, "f1")
			for i := 0; i < total; i++ {
				if got.consumed["e"+strconv.Itoa(i)] == 0 {
					lost++
					t.Errorf("e%d was never consumed", i)
				}
			}
			for id, n := range got.consumed {
				if n > 1 {
					doubled++
					t.Errorf("%s consumed %d times", id, n)
				}
			}
			for id, n := range got.produced {
				require.Equal(t, 1, got.consumed[id], "%s (produced %d times) consumed once", id, n)
			}
			require.Equal(t, total, got.cp.NodeVisits["intake"], "intake fired once per envelope")
			survived++
		})
	}
	t.Logf("served session: %d kills survived, %d envelopes lost, %d consumed twice", survived, lost, doubled)
}

func jetstreamMsgID(id string) jetstream.PublishOpt { return jetstream.WithMsgID(id) }

// TestDurableCLI drives history, a fork with resume --from --as, and gc
// from the command line on a completed run.
func TestDurableCLI(t *testing.T) {
	dir := t.TempDir()
	pipeline, err := filepath.Abs("testdata/crash.dot")
	require.NoError(t, err)
	_, _, err = child(t, dir, "", "run", pipeline, "--data", "data", "--logs", "logs", "--id", "h1")
	require.NoError(t, err)
	_, out, err := child(t, dir, "", "history", "h1", "--data", "data")
	require.NoError(t, err)
	require.Regexp(t, `(?m)^3\s+\S+\s+prep\s+1\s+success\s+1\s+1\s*$`, string(out))
	require.Regexp(t, `(?m)^12\s+\S+\s+exit\s+1\s+success\s+1\s+0\s+success \(run\)$`, string(out))

	// Fork after prep: the fork runs the rest; the original is intact.
	_, out, err = child(t, dir, "", "resume", "h1", "--from", "3", "--as", "h2", "--data", "data", "--logs", "logs2", "--json")
	require.NoError(t, err)
	require.Equal(t, "success", lastEvent(t, out)["status"])
	fork := readOutcome(t, dir, "h2")
	require.NotContains(t, fork.firings, "prep:1:success", "the fork starts after prep")
	require.Contains(t, fork.firings, "s3:1:success")
	require.Equal(t, 1, fork.effects["prep h1/prep/1/1"], "prep ran once, in the original")
	orig := readOutcome(t, dir, "h1")
	require.Len(t, orig.firings, 11)

	_, out, err = child(t, dir, "", "gc", "--data", "data", "--dry-run")
	require.NoError(t, err)
	require.Empty(t, string(out), "nothing completed a week ago")
	_, out, err = child(t, dir, "", "gc", "--data", "data", "--retain", "1ns")
	require.NoError(t, err)
	require.Contains(t, string(out), "removed session h1")
	require.Contains(t, string(out), "removed session h2")
	_, _, err = child(t, dir, "", "history", "h1", "--data", "data")
	require.Error(t, err)
}

// unsigned is an envelope id without the session's signature (each run
// has its own key), so that runs of different sessions compare.
func unsigned(id string) string {
	if i := strings.LastIndexByte(id, '~'); i >= 0 {
		return id[:i]
	}
	return id
}
