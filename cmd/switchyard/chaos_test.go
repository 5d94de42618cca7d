package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/session"
)

// The cluster chaos suite: one reactive session (testdata/chaos.dot) with
// a queue edge fed by `switchyard pub`, a pool node run by `switchyard
// worker` processes, a local tool, a cron node and a human gate, served on
// a 3-server nats-server cluster with JetStream R3 by an owner and a `serve
// --takeover` standby, with two workers. The owner is SIGKILLed, the server
// it (or a worker) is connected to is killed, a server is restarted with
// its store, in the middle of the event stream; the session's result must
// equal an undisturbed run's and the side effects must be exact.
//
// The short form (an undisturbed run, then one run with the three
// disruptions one after the other) always runs but under -short; with
// SWITCHYARD_FULL=1 (CI) each disruption also gets a run of its own, with
// more events (about 25–30 s more on a 2-core machine under -race).

// chaosProc is a switchyard child process of the suite.
type chaosProc struct {
	name   string
	server int // the cluster server it was pointed at (its first)
	cmd    *exec.Cmd
	log    syncBuffer
	exited chan struct{}
	err    error
}

func (p *chaosProc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop ends p with sig and waits (up to 30 s) for it.
func (p *chaosProc) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if !p.alive() {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not stop on %v:\n%s", p.name, sig, p.log.String())
	}
}

// chaosRig is the cluster, the test's own connection to it and the built
// binary.
type chaosRig struct {
	cl   *brokertest.Cluster
	urls []string
	b    *broker.Broker
	bin  string
	file string
}

func newChaosRig(t *testing.T) *chaosRig {
	t.Helper()
	file, err := filepath.Abs("testdata/chaos.dot")
	require.NoError(t, err)
	r := &chaosRig{bin: switchyardBinary(t), file: file}
	r.cl = brokertest.StartCluster(t, 3)
	r.urls = strings.Split(r.cl.URL(), ",")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r.b, err = broker.Start(ctx, broker.Config{URL: r.cl.URL()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.b.Close() })
	return r
}

// start runs the switchyard binary pointed at server (pinned there: the
// other servers are learnt from it and used only when it goes away), with
// the side-effect file effects. The process is killed when t ends, if it
// still runs: a run that failed half-way (its t, a subtest's) never
// reaches its own stop, and its workers, left running, took the next
// run's jobs from the shared pool and wrote their side effects to the
// failed run's file — the next subtest failed for it.
func (r *chaosRig) start(t *testing.T, name string, server int, effects string, args ...string) *chaosProc {
	t.Helper()
	p := &chaosProc{name: name, server: server, exited: make(chan struct{})}
	p.cmd = exec.Command(r.bin, append(args, "--nats", r.urls[server])...)
	p.cmd.Env = append(os.Environ(), "EFFECTS="+effects)
	p.cmd.Stdout, p.cmd.Stderr = &p.log, &p.log // serve's live log of events, and its stderr
	require.NoError(t, p.cmd.Start())
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() { _ = p.cmd.Process.Kill(); <-p.exited })
	return p
}

// checkpoint is the session's latest checkpoint (nil while none is read).
func (r *chaosRig) checkpoint(id string) *session.Checkpoint {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cp, err := session.LoadCheckpoint(ctx, r.b, id, 0)
	if err != nil {
		return nil
	}
	return cp
}

// waitFor polls the store until cond holds, failing after within.
func (r *chaosRig) waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(100 * time.Millisecond) // polling the store
	}
}

// visits is how many firings of node the session committed.
func (r *chaosRig) visits(id, node string) int {
	if cp := r.checkpoint(id); cp != nil {
		return cp.NodeVisits[node]
	}
	return 0
}

// chaosRun is one session's run on the rig.
type chaosRun struct {
	rig      *chaosRig
	t        *testing.T
	id, dir  string
	effects  string
	owner    *chaosProc
	standby  *chaosProc
	workers  []*chaosProc
	events   *eventWaiter
	wlog     syncBuffer
	next     int               // the next event number to publish
	acked    map[string]string // envelope id -> its message, acknowledged
	maxPub   time.Duration
	down     int // the server killServer killed
	disrupts []disrupted
}

// procs are every process of the run, for failure messages.
func (c *chaosRun) procs() []*chaosProc {
	return append([]*chaosProc{c.owner, c.standby}, c.workers...)
}

// publish sends events n (next...next+n-1) with switchyard pub onto the
// queue edge; each is acknowledged (pub retries until it is).
func (c *chaosRun) publish(n int) {
	c.t.Helper()
	for i := 0; i < n; i++ {
		msg := "m" + strconv.Itoa(c.next)
		c.next++
		began := time.Now()
		code, out, errOut := cli(c.t, "pub", c.id, "work", msg, "--edge", "src:work", "--nats", c.rig.cl.URL())
		require.Equal(c.t, 0, code, "pub %s: %s", msg, errOut)
		if d := time.Since(began); d > c.maxPub {
			c.maxPub = d
		}
		f := strings.Fields(out) // published ID on SUBJECT ...
		require.GreaterOrEqual(c.t, len(f), 2, out)
		c.acked[f[1]] = msg
	}
}

// ownerProc is the process that holds the session's lease now.
func (c *chaosRun) ownerProc() *chaosProc {
	c.t.Helper()
	var o *session.Owner
	c.rig.waitFor(c.t, "a live owner", 30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		o, err = session.ReadOwner(ctx, c.rig.b, c.id, time.Now())
		return err == nil && o != nil
	})
	for _, p := range []*chaosProc{c.owner, c.standby} {
		if p.cmd.Process.Pid == o.PID {
			return p
		}
	}
	c.t.Fatalf("the owner pid %d is none of the run's serve processes", o.PID)
	return nil
}

// chaosResult is what a run's session did, to compare with the
// undisturbed run's.
type chaosResult struct {
	Work     []string          // the inputs work's side effect saw (distinct)
	Sink     []string          // the inputs sink's side effect saw
	Visits   map[string]int    // committed firings per node (but tick's)
	Outcomes map[string]string // each node's last status (but tick's)
}

// disrupted is when a disruption happened.
type disrupted struct {
	name string
	at   time.Time
}

// disruption is one chaos case: do disrupts the run and says what it did;
// heal (if any) runs once the next batch of events is published.
type disruption struct {
	name string
	do   func(c *chaosRun) string
	heal func(c *chaosRun)
}

// killOwner SIGKILLs the session's owner; the standby takes it over.
var killOwner = disruption{name: "kill-owner", do: func(c *chaosRun) string {
	p := c.ownerProc()
	require.NoError(c.t, p.cmd.Process.Signal(syscall.SIGKILL))
	at := time.Now()
	<-p.exited
	require.True(c.t, killed(p.err))
	c.disrupts = append(c.disrupts, disrupted{"kill-owner", at})
	taker := c.standby
	if p == c.standby {
		taker = c.owner
	}
	c.rig.waitFor(c.t, "the session taken over", 60*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		o, err := session.ReadOwner(ctx, c.rig.b, c.id, time.Now())
		return err == nil && o != nil && o.PID == taker.cmd.Process.Pid
	})
	return fmt.Sprintf("owner %s SIGKILLed; %s holds the lease %v later", p.name, taker.name, time.Since(at).Round(time.Millisecond))
}}

// killServer kills the server the session's owner is connected to (and
// the worker pinned there); the next batch is published and fired without
// it, then it starts again on its store.
var killServer = disruption{name: "kill-server", do: func(c *chaosRun) string {
	p := c.ownerProc()
	c.down = p.server
	var on []string
	for _, q := range c.procs() {
		if q.server == c.down && q.alive() {
			on = append(on, q.name)
		}
	}
	c.disrupts = append(c.disrupts, disrupted{"kill-server", time.Now()})
	c.rig.cl.Kill(c.down)
	return fmt.Sprintf("server n%d killed (%s connected to it)", c.down+1, strings.Join(on, ", "))
}, heal: func(c *chaosRun) {
	c.rig.waitFor(c.t, "the events published while a server is down fired", 60*time.Second,
		func() bool { return c.rig.visits(c.id, "work") >= c.next })
	c.rig.cl.Restart(c.down)
	c.rig.cl.WaitReady()
}}

// restartServer stops the server holding the leader of the session's
// stream and starts it again on its store.
var restartServer = disruption{name: "restart-server", do: func(c *chaosRun) string {
	// (A server just back may leave the stream without a leader a moment.)
	leader := ""
	c.rig.waitFor(c.t, "the session stream's leader", 60*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := c.rig.b.JetStream().Stream(ctx, broker.StreamName(c.id))
		if err == nil && st.CachedInfo().Cluster != nil {
			leader = st.CachedInfo().Cluster.Leader
		}
		return leader != ""
	})
	victim := c.rig.cl.Index(leader)
	require.GreaterOrEqual(c.t, victim, 0, leader)
	at := time.Now()
	c.disrupts = append(c.disrupts, disrupted{"restart-server", at})
	c.rig.cl.Kill(victim)
	c.rig.cl.Restart(victim)
	c.rig.cl.WaitReady()
	return fmt.Sprintf("server n%d (the stream's leader) restarted: back %v later", victim+1, time.Since(at).Round(time.Millisecond))
}}

// run serves the chaos session id with perBatch events published before
// each disruption and after the last one, and returns its result after
// checking that it is exact: every acknowledged event fired work once,
// every pool job's effect committed once, sink fired once per work output,
// no cron tick twice, and the gate answered.
func (r *chaosRig) run(t *testing.T, id string, perBatch int, disrupts ...disruption) *chaosResult {
	t.Helper()
	c := &chaosRun{rig: r, t: t, id: id, dir: t.TempDir(), acked: map[string]string{}}
	c.effects = filepath.Join(c.dir, "effects")
	logs := filepath.Join(c.dir, "logs")
	began := time.Now()

	watcher, err := nats.Connect(r.urls[2])
	require.NoError(t, err)
	defer watcher.Close()
	c.events = watchEvents(t, watcher, "sy."+id+".evt.>", &c.wlog)
	t.Cleanup(func() {
		if t.Failed() { // what every process said (serve's live log of events included)
			for _, p := range c.procs() {
				if p != nil {
					t.Logf("--- %s (server n%d):\n%s", p.name, p.server+1, p.log.String())
				}
			}
		}
	})

	// Workers A (on n1) and B (on n2), then the owner (n1) and the standby (n2).
	for i, name := range []string{"worker-a", "worker-b"} {
		c.workers = append(c.workers, r.start(t, name, i, c.effects, "worker", "--pool", "cpu", "--replicas", "3", "--ack-wait", "2s", "--workdir", c.dir))
	}
	c.owner = r.start(t, "owner", 0, c.effects, "serve", r.file, "--id", id, "--replicas", "3", "--logs", logs)
	c.events.wait("session.started", "")
	c.standby = r.start(t, "standby", 1, c.effects, "serve", "--all", "--takeover", "--logs", logs)

	c.publish(perBatch)
	code, _, errOut := cli(t, "pub", id, "ask", "ship it?", "--nats", r.cl.URL())
	require.Equal(t, 0, code, errOut)
	c.events.wait("human.question", "ask")
	for _, d := range disrupts {
		// Mid-stream: some of the batch committed, not all of it.
		floor := c.next - perBatch
		r.waitFor(t, "work firings before "+d.name, 60*time.Second, func() bool { return r.visits(id, "work") > floor })
		what := d.do(c)
		slowest := c.maxPub
		c.maxPub = 0
		c.publish(perBatch)
		t.Logf("%s: %s; the slowest pub of the next batch %v", d.name, what, c.maxPub.Round(time.Millisecond))
		c.maxPub = max(c.maxPub, slowest)
		if d.heal != nil {
			d.heal(c)
		}
	}
	total := c.next
	r.waitFor(t, fmt.Sprintf("%d work and sink firings", total), 120*time.Second, func() bool {
		cp := r.checkpoint(id)
		return cp != nil && cp.NodeVisits["work"] >= total && cp.NodeVisits["sink"] >= total
	})

	// The gate asked before the disruptions is answered now.
	r.waitFor(t, "the gate's answer taken", 60*time.Second, func() bool {
		code, _, _ := cli(t, "answer", id, "ask", "N", "--nats", r.cl.URL())
		return code == 0
	})
	r.waitFor(t, "the No branch", 30*time.Second, func() bool { return r.visits(id, "no") == 1 })
	ticks := r.visits(id, "tick")
	r.waitFor(t, "two more ticks", 30*time.Second, func() bool { return r.visits(id, "tick") >= ticks+2 })

	code, _, errOut = cli(t, "stop", id, "--nats", r.cl.URL())
	require.Equal(t, 0, code, errOut)
	for _, p := range c.procs() {
		began := time.Now()
		p.stop(t, syscall.SIGTERM)
		if d := time.Since(began); d > 2*time.Second {
			t.Logf("%s took %v to stop", p.name, d.Round(time.Millisecond))
		}
	}
	res := c.result()
	t.Logf("%s: %d events, %d ticks, %v; the slowest pub %v", id, total, r.visits(id, "tick"),
		time.Since(began).Round(100*time.Millisecond), c.maxPub.Round(time.Millisecond))
	return res
}

// result reads the run's session from the store and its side effects, and
// checks them for exactness.
func (c *chaosRun) result() *chaosResult {
	t := c.t
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hist, err := session.History(ctx, c.rig.b, c.id)
	require.NoError(t, err)
	require.NotEmpty(t, hist)
	require.LessOrEqual(t, hist[0].Seq, uint64(1), "the whole journal is there")
	cp := c.rig.checkpoint(c.id)
	require.NotNil(t, cp)

	// Every acknowledged outside event fired work once, and nothing else
	// did; every envelope work produced fired sink once.
	consumed := map[string]map[string]int{}
	produced := map[string]int{}
	firings := map[string]int{} // node:firing -> commits
	var ticks []time.Time       // when each committed tick fired
	for _, h := range hist {
		if h.Status == "" {
			continue
		}
		firings[h.Node+":"+strconv.FormatUint(h.Firing, 10)]++
		if consumed[h.Node] == nil {
			consumed[h.Node] = map[string]int{}
		}
		for _, id := range h.ConsumedIDs {
			consumed[h.Node][unsigned(id)]++
		}
		if h.Node == "work" {
			for _, id := range h.ProducedIDs {
				produced[unsigned(id)]++
			}
		}
		if h.Node == "tick" {
			// A tick's envelope id ends with the scheduled time it
			// stands for (a tick missed during a takeover fires late
			// under it).
			require.Len(t, h.ConsumedIDs, 1)
			id := unsigned(h.ConsumedIDs[0])
			ns, err := strconv.ParseInt(id[strings.LastIndexByte(id, '.')+1:], 10, 64)
			require.NoError(t, err, id)
			ticks = append(ticks, time.Unix(0, ns))
		}
	}
	for f, n := range firings {
		require.Equal(t, 1, n, "firing %s committed %d times", f, n)
	}
	var want []string
	for id := range c.acked {
		want = append(want, id)
	}
	sort.Strings(want)
	require.Equal(t, want, keysOf(consumed["work"]), "work consumed exactly the acknowledged events")
	for id, n := range consumed["work"] {
		require.Equal(t, 1, n, "event %s (%s) consumed %d times", id, c.acked[id], n)
	}
	require.Len(t, produced, len(want))
	require.Equal(t, keysOf(produced), keysOf(consumed["sink"]), "sink consumed what work produced")
	for id, n := range consumed["sink"] {
		require.Equal(t, 1, n, "work's output %s consumed %d times by sink", id, n)
	}
	// A cron tick fires once: @every 1s falls on whole seconds, and no
	// second's tick fired twice (two owners would both fire it, and a
	// late tick fired again after it was committed would repeat its id).
	seconds := map[int64]int{}
	for _, at := range ticks {
		seconds[at.Unix()]++
		require.Equal(t, 1, seconds[at.Unix()], "the tick of %s fired twice", at.Format("15:04:05"))
	}

	// The side effects: each input once per node, with one attempt id
	// (a job run again after a worker's death keeps its attempt id).
	data, err := os.ReadFile(c.effects)
	require.NoError(t, err)
	attempts := map[string]map[string]int{} // node input -> attempt -> runs
	reruns := 0
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		i := strings.LastIndexByte(line, ' ')
		require.Positive(t, i, line)
		key, attempt := line[:i], line[i+1:]
		if attempts[key] == nil {
			attempts[key] = map[string]int{}
		}
		attempts[key][attempt]++
		if attempts[key][attempt] > 1 {
			reruns++
		}
	}
	res := &chaosResult{Visits: map[string]int{}, Outcomes: map[string]string{}}
	for key, as := range attempts {
		require.Len(t, as, 1, "%s ran as %d attempts: %v\n%s", key, len(as), as, data)
		node, input, _ := strings.Cut(key, " ")
		switch node {
		case "work":
			res.Work = append(res.Work, input)
		case "sink":
			res.Sink = append(res.Sink, input)
		}
	}
	sort.Strings(res.Work)
	sort.Strings(res.Sink)
	for n, v := range cp.NodeVisits {
		if n != "tick" {
			res.Visits[n] = v
		}
	}
	for n, o := range cp.NodeOutcomes {
		if n != "tick" {
			res.Outcomes[n] = o
		}
	}
	// The pause each disruption cost: the first commit of work and of
	// tick after it.
	for _, d := range c.disrupts {
		next := map[string]time.Duration{}
		for _, h := range hist {
			if (h.Node == "work" || h.Node == "tick") && h.Time.After(d.at) && next[h.Node] == 0 {
				next[h.Node] = h.Time.Sub(d.at)
			}
		}
		t.Logf("cost of %s: the next tick committed %v after it, the next work firing %v after it",
			d.name, next["tick"].Round(time.Millisecond), next["work"].Round(time.Millisecond))
	}
	t.Logf("%d side effects, %d of them runs again of an attempt (same attempt id)", len(attempts), reruns)
	return res
}

func keysOf(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestClusterChaos: the undisturbed run, then the run disrupted by the
// three chaos cases one after the other; with SWITCHYARD_FULL=1 each case
// also alone. Every run publishes the same events: its result must be the
// undisturbed run's.
func TestClusterChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("a three-server cluster and six processes: not with -short")
	}
	r := newChaosRig(t)
	batch := 3
	if os.Getenv("SWITCHYARD_FULL") == "1" {
		batch = 6
	}
	want := r.run(t, "calm", batch*4)
	require.Len(t, want.Work, batch*4)
	require.Len(t, want.Sink, batch*4)
	require.Equal(t, 1, want.Visits["no"])
	require.Zero(t, want.Visits["yes"])

	t.Run("all", func(t *testing.T) {
		require.Equal(t, want, r.run(t, "all", batch, killOwner, killServer, restartServer))
	})
	if os.Getenv("SWITCHYARD_FULL") != "1" {
		return
	}
	for _, d := range []disruption{killOwner, killServer, restartServer} {
		t.Run(d.name, func(t *testing.T) {
			require.Equal(t, want, r.run(t, strings.ReplaceAll(d.name, "-", ""), batch*2, d))
		})
	}
}
