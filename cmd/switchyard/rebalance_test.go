package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/internal/brokertest"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

// nodeFirings counts node.completed events per session and node, and
// notes when each session's last handover began and its last resume was
// heard.
type nodeFirings struct {
	mu      sync.Mutex
	n       map[[2]string]int
	handing map[string]time.Time
	resumed map[string]time.Time
}

func countNodeFirings(t *testing.T, nc *nats.Conn) *nodeFirings {
	t.Helper()
	f := &nodeFirings{n: map[[2]string]int{}, handing: map[string]time.Time{}, resumed: map[string]time.Time{}}
	_, err := nc.Subscribe("sy.*.evt.session.*", func(m *nats.Msg) {
		id := strings.Split(m.Subject, ".")[1]
		f.mu.Lock()
		defer f.mu.Unlock()
		switch m.Subject[strings.LastIndexByte(m.Subject, '.')+1:] {
		case "handing_over":
			f.handing[id] = time.Now()
		case "resumed":
			f.resumed[id] = time.Now()
		}
	})
	require.NoError(t, err)
	_, err = nc.Subscribe("sy.*.evt.node.completed", func(m *nats.Msg) {
		var ev pb.Event
		if proto.Unmarshal(m.Data, &ev) != nil {
			return
		}
		f.mu.Lock()
		f.n[[2]string{strings.Split(m.Subject, ".")[1], ev.Node}]++
		f.mu.Unlock()
	})
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	return f
}

// moveTime is how long session id took from its handover's beginning to
// its resume at the next owner (0 when it did not move).
func (f *nodeFirings) moveTime(id string) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	h, ok := f.handing[id]
	if !ok {
		return 0
	}
	return f.resumed[id].Sub(h)
}

func (f *nodeFirings) of(id, node string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n[[2]string{id, node}]
}

// TestPlacementRebalances: one member runs six sessions; two more join and
// it hands four of them over (once the members stayed the same for its
// settle period), so they run 2-2-2. Outside events published before,
// during and after the move each run the work node once (its side effects
// counted), no cron tick fires twice, and a gate asked before the move is
// answered after it.
func TestPlacementRebalances(t *testing.T) {
	srv := brokertest.Start(t, brokertest.Listen("out", "adm"))
	rebalanceSpread(t, srv.ClientURL(), srv)
}

// TestPlacementRebalancesOnCluster: the same on a 3-server cluster, every
// resource with 3 replicas (SWITCHYARD_FULL=1).
func TestPlacementRebalancesOnCluster(t *testing.T) {
	cl, b := fullCluster(t)
	rebalanceSpread(t, cl.URL(), b, "--replicas", "3")
}

// rebalanceSpread is TestPlacementRebalances on the server at url (srv
// connected to it); extra goes to every member.
func rebalanceSpread(t *testing.T, url string, srv *broker.Broker, extra ...string) {
	file, err := filepath.Abs("testdata/rebalance.dot")
	require.NoError(t, err)
	dir := t.TempDir()
	effects := filepath.Join(dir, "effects")
	bin := switchyardBinary(t)
	start := func(log *syncBuffer, args ...string) (*exec.Cmd, chan error) {
		args = append(append(args, extra...), "--nats", url, "--token", "adm", "--logs", filepath.Join(dir, "logs"), "--settle", "1s")
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "EFFECTS="+effects)
		cmd.Stderr = log
		require.NoError(t, cmd.Start())
		done, exited := make(chan error, 1), make(chan struct{})
		go func() { done <- cmd.Wait(); close(exited) }()
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
		return cmd, done
	}
	watcher, err := nats.Connect(url, nats.Token("adm"))
	require.NoError(t, err)
	defer watcher.Close()
	fired := countNodeFirings(t, watcher)

	var logs [3]syncBuffer
	all := func() string {
		return fmt.Sprintf("m0:\n%s\nm1:\n%s\nm2:\n%s", logs[0].String(), logs[1].String(), logs[2].String())
	}
	ids := []string{"r0", "r1", "r2", "r3", "r4", "r5"}
	args := []string{"serve", "--place", "--all"}
	for _, id := range ids {
		args = append(args, file, "--id", id)
	}
	var procs [3]*exec.Cmd
	var dones [3]chan error
	procs[0], dones[0] = start(&logs[0], args...)
	waitOwned(t, srv, ids, map[int]string{procs[0].Process.Pid: "m0"}, 30*time.Second, all)

	round := 0
	pub := func() {
		round++
		for _, id := range ids {
			code, _, errOut := cli(t, "pub", id, "work", fmt.Sprintf("%s-%d", id, round), "--edge", "src:work", "--nats", url, "--token", "out")
			require.Equal(t, 0, code, errOut)
		}
	}
	waitFired := func(n int) {
		deadline := time.Now().Add(60 * time.Second)
		for _, id := range ids {
			for fired.of(id, "work") < n {
				require.True(t, time.Now().Before(deadline), "session %s: work fired %d times, want %d\n%s", id, fired.of(id, "work"), n, all())
				time.Sleep(20 * time.Millisecond) // polling the event counts
			}
		}
	}
	pub()
	waitFired(1)
	// r0's gate asks; it is answered after the move.
	code, _, errOut := cli(t, "pub", "r0", "ask", "ship it?", "--nats", url, "--token", "adm")
	require.Equal(t, 0, code, errOut)

	// Two members join; rounds of events are published until the sessions
	// have moved, so some are running or waiting when they move.
	for i := 1; i < 3; i++ {
		procs[i], dones[i] = start(&logs[i], "serve", "--all", "--takeover")
	}
	for i := 1; i < 3; i++ {
		waitLog(t, &logs[i], "member ", 20*time.Second)
	}
	joined := time.Now()
	pids := map[int]string{}
	for i, p := range procs {
		pids[p.Process.Pid] = fmt.Sprint("m", i)
	}
	deadline := time.Now().Add(60 * time.Second)
	var held map[string]int
	var published time.Time
	for {
		if time.Since(published) >= 500*time.Millisecond { // a round every half second (work takes 0.3 s)
			pub()
			published = time.Now()
		}
		held = owners(t, srv, ids)
		per := map[int]int{}
		for _, pid := range held {
			per[pid]++
		}
		if len(held) == len(ids) && per[procs[0].Process.Pid] == 2 && per[procs[1].Process.Pid] == 2 && per[procs[2].Process.Pid] == 2 {
			break
		}
		require.True(t, time.Now().Before(deadline), "not spread 2-2-2: %v\n%s", held, all())
		time.Sleep(50 * time.Millisecond) // polling the leases
	}
	t.Logf("spread 2-2-2 %v after the members joined: %v", time.Since(joined).Round(time.Millisecond), held)

	for i := range logs {
		for _, line := range strings.Split(logs[i].String(), "\n") {
			if strings.Contains(line, "handed over") || strings.Contains(line, "resumed session") {
				t.Logf("m%d: %s", i, line)
			}
		}
	}
	t.Logf("%d rounds of events published by then", round)
	waitFired(round)
	moved := 0
	for _, id := range ids {
		d := fired.moveTime(id)
		if d == 0 {
			continue
		}
		moved++
		// The new owner holds the lease from the start of its resume; its
		// session.resumed comes once the resume is done.
		deadline := time.Now().Add(30 * time.Second)
		for ; d < 0; d = fired.moveTime(id) {
			require.True(t, time.Now().Before(deadline), "session %s never resumed after its handover\n%s", id, all())
			time.Sleep(20 * time.Millisecond) // polling the events seen
		}
		t.Logf("session %s moved in %v (from session.handing_over to session.resumed)", id, d.Round(time.Millisecond))
	}
	require.Equal(t, 4, moved, "four sessions moved, no more")
	pub()
	waitFired(round)

	// The gate asked before the move is answered at its new owner.
	deadline = time.Now().Add(30 * time.Second)
	for {
		code, _, _ := cli(t, "answer", "r0", "ask", "N", "--nats", url, "--token", "adm")
		if code == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "r0's gate is not answerable\n%s", all())
	}
	deadline = time.Now().Add(30 * time.Second)
	for fired.of("r0", "no") < 1 {
		require.True(t, time.Now().Before(deadline), "the No branch did not run\n%s", all())
		time.Sleep(20 * time.Millisecond) // polling the event counts
	}
	for _, id := range ids {
		ticks := fired.of(id, "tick")
		deadline = time.Now().Add(30 * time.Second)
		for fired.of(id, "tick") < ticks+1 {
			require.True(t, time.Now().Before(deadline), "session %s: no tick after the move", id)
			time.Sleep(20 * time.Millisecond) // polling the event counts
		}
	}

	for i, p := range procs {
		require.NoError(t, p.Process.Signal(syscall.SIGTERM))
		select {
		case err := <-dones[i]:
			require.NoError(t, err, all())
		case <-time.After(30 * time.Second):
			t.Fatal("a member did not stop")
		}
	}
	// Each event ran work once (its side effect once), no firing was
	// committed twice, no second's tick fired twice.
	data, err := os.ReadFile(effects)
	require.NoError(t, err)
	lines := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(l)
		require.Len(t, f, 3, l)
		lines[f[1]]++
	}
	for _, id := range ids {
		for r := 1; r <= round; r++ {
			require.Equal(t, 1, lines[fmt.Sprintf("%s-%d", id, r)], "event %s-%d ran work once", id, r)
		}
		require.Equal(t, round, fired.of(id, "work"), "session %s: work committed once per event", id)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		hist, err := session.History(ctx, srv, id)
		cancel()
		require.NoError(t, err)
		firings, seconds := map[string]int{}, map[int64]int{}
		for _, h := range hist {
			if h.Status == "" {
				continue
			}
			firings[h.Node+":"+strconv.FormatUint(h.Firing, 10)]++
			require.Equal(t, 1, firings[h.Node+":"+strconv.FormatUint(h.Firing, 10)], "session %s: firing %s:%d committed twice", id, h.Node, h.Firing)
			if h.Node == "tick" && len(h.ConsumedIDs) == 1 {
				tid := unsigned(h.ConsumedIDs[0])
				ns, err := strconv.ParseInt(tid[strings.LastIndexByte(tid, '.')+1:], 10, 64)
				require.NoError(t, err, tid)
				seconds[ns/int64(time.Second)]++
				require.Equal(t, 1, seconds[ns/int64(time.Second)], "session %s: a tick fired twice", id)
			}
		}
	}
}

// TestPlacementEditMovesSession: a live edit that gives a running session a
// placement its member lacks moves it to a member that has it.
func TestPlacementEditMovesSession(t *testing.T) {
	srv := brokertest.Start(t, brokertest.Listen("out", "adm"))
	url := srv.ClientURL()
	dir := t.TempDir()
	v1, v2 := placedGraph(t, dir, "v1.dot", ""), placedGraph(t, dir, "v2.dot", "gpu=true")
	start := func(log *syncBuffer, args ...string) *exec.Cmd {
		cmd, _ := adminProcesses(t, switchyardBinary(t), url, dir)(log, append(args, "--settle", "1s")...)
		return cmd
	}
	var plain, gpu syncBuffer
	all := func() string { return fmt.Sprintf("plain:\n%s\ngpu:\n%s", plain.String(), gpu.String()) }
	p := start(&plain, "serve", "--place", "--all", v1, "--id", "e1")
	waitOwned(t, srv, []string{"e1"}, map[int]string{p.Process.Pid: "plain"}, 30*time.Second, all)
	waitLog(t, &plain, "resumed session e1", 20*time.Second) // it answers edits
	g := start(&gpu, "serve", "--all", "--takeover", "--labels", "gpu=true")
	waitLog(t, &gpu, "member ", 20*time.Second)
	code, _, errOut := cli(t, "edit", "e1", v2, "--nats", url, "--token", "adm")
	require.Equal(t, 0, code, errOut)
	began := time.Now()
	waitOwned(t, srv, []string{"e1"}, map[int]string{g.Process.Pid: "gpu"}, 30*time.Second, all)
	t.Logf("moved to the member with the label %v after the edit", time.Since(began).Round(time.Millisecond))
	waitLog(t, &plain, "session e1 handed over", 10*time.Second)
}
