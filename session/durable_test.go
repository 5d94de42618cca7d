package session_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/nodes/agent"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

// counter counts handler runs per node, and the attempt ids they saw.
type counter struct {
	mu       sync.Mutex
	runs     map[string]int
	attempts map[string][]string
}

func newCounter() *counter { return &counter{runs: map[string]int{}, attempts: map[string][]string{}} }

func (c *counter) add(in *nodes.Input) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.runs[in.Node.ID]++
	c.attempts[in.Node.ID] = append(c.attempts[in.Node.ID], in.AttemptID)
}

func (c *counter) get(node string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs[node]
}

// TestDurableRestart stops a durable session while a node runs, restarts
// the embedded server on the same data directory (what a new process
// does) and resumes the session by id alone: the interrupted node runs
// again with the same attempt id, nothing before it runs twice, and the
// history and a fork from an earlier checkpoint are available.
func TestDurableRestart(t *testing.T) {
	data := t.TempDir()
	src := `digraph d { graph [budget_tokens=1000]; start [shape=Mdiamond]; exit [shape=Msquare]
		a [type="custom.echo"]; b [type="custom.hang"]; c [type="custom.echo"]
		start -> a -> b -> c -> exit }`
	cnt := newCounter()
	block := true
	var blockMu sync.Mutex
	blocked := make(chan struct{}, 1)
	reg := func(reg *nodes.Registry) {
		echo := nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
			cnt.add(in)
			return &nodes.Outcome{Status: nodes.StatusSuccess, Response: in.Node.ID + " done",
				ContextUpdates: map[string]string{"seen." + in.Node.ID: "yes"},
				Usage:          nodes.Usage{InputTokens: 7, OutputTokens: 3}}, nil
		})
		hang := nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
			cnt.add(in)
			blockMu.Lock()
			b := block
			blockMu.Unlock()
			if b {
				blocked <- struct{}{}
				<-ctx.Done()
				return nil, ctx.Err()
			}
			return &nodes.Outcome{Status: nodes.StatusSuccess, Response: "b done"}, nil
		})
		require.NoError(t, reg.Register(nodes.Info{Type: "custom.echo", Handler: echo}))
		require.NoError(t, reg.Register(nodes.Info{Type: "custom.hang", Handler: hang}))
	}
	start := func() *broker.Broker {
		b := brokertest.Start(t, brokertest.Configure(func(c *broker.Config) { c.DataDir = data }))
		return b
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// First process: runs until b, then dies.
	b1 := start()
	r1 := &run{t: t, broker: b1, reg: reg}
	cfg := r1.durable(src, "dur1")
	s1, err := session.Start(ctx, cfg)
	require.NoError(t, err)
	select {
	case <-blocked:
	case <-ctx.Done():
		t.Fatal("b never started")
	}
	s1.Stop()
	require.NoError(t, b1.Close())

	// Second process: the same data directory; resume by id.
	blockMu.Lock()
	block = false
	blockMu.Unlock()
	b2 := start()
	r2 := &run{t: t, broker: b2, reg: reg}
	cfg2 := r2.durable(src, "dur1")
	s2, err := session.Resume(ctx, cfg2)
	require.NoError(t, err)
	rep, err := s2.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status, rep.Reason)
	require.Equal(t, 1, cnt.get("a"), "a ran before the crash and is not run again")
	require.Equal(t, 2, cnt.get("b"), "b was interrupted and runs again")
	require.Equal(t, 1, cnt.get("c"))
	cnt.mu.Lock()
	require.Equal(t, cnt.attempts["b"][0], cnt.attempts["b"][1], "the re-run keeps its idempotency key")
	cnt.mu.Unlock()

	hist, err := session.History(ctx, b2, "dur1")
	require.NoError(t, err)
	var visited []string
	for _, h := range hist {
		if h.Status != "" {
			visited = append(visited, h.Node+":"+h.Status)
		}
	}
	require.Equal(t, []string{"start:success", "a:success", "b:success", "c:success", "exit:success"}, visited)
	require.Equal(t, "success (run)", hist[len(hist)-1].Terminal)
	cp, err := session.LoadCheckpoint(ctx, b2, "dur1", 0)
	require.NoError(t, err)
	require.Equal(t, "success", cp.Status)
	require.Empty(t, cp.Pending)
	// The budget spent before the restart is not forgotten: a and c each
	// spent 10 tokens, one on each side of it.
	var spent int64
	for _, sp := range cp.Scheduler.Spent {
		spent = max(spent, sp.Tokens)
	}
	require.Equal(t, int64(20), spent)
	require.Equal(t, 5, cp.Scheduler.Total, "five firings, the interrupted one counted once")

	// Fork from the checkpoint after a: b and c run again in the fork; the
	// original is untouched.
	var afterA uint64
	for _, h := range hist {
		if h.Node == "a" && h.Status == "success" {
			afterA = h.Seq
		}
	}
	require.NotZero(t, afterA)
	cfg3 := r2.durable(src, "dur1fork")
	cfg3.ForkOf, cfg3.FromCheckpoint = "dur1", afterA
	s3, err := session.Resume(ctx, cfg3)
	require.NoError(t, err)
	rep, err = s3.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status, rep.Reason)
	require.Equal(t, 1, cnt.get("a"), "the fork starts after a")
	require.Equal(t, 3, cnt.get("b"))
	require.Equal(t, 2, cnt.get("c"))
	again, err := session.History(ctx, b2, "dur1")
	require.NoError(t, err)
	require.Equal(t, hist, again, "the original's history is unchanged")
	forkHist, err := session.History(ctx, b2, "dur1fork")
	require.NoError(t, err)
	require.Equal(t, afterA+1, forkHist[0].Seq)
	meta, err := session.ReadMeta(ctx, b2, "dur1fork")
	require.NoError(t, err)
	require.Equal(t, "dur1", meta.ForkOf)
}

// TestDurableRideThrough runs a durable session on a NATS server reached
// by URL, and restarts that server (same port, same store) while a node
// runs: the runtime reconnects, its writes wait for the server, and the
// run completes with every firing once and nothing lost.
func TestDurableRideThrough(t *testing.T) {
	dir := t.TempDir()
	external := func(listen string) *broker.Broker {
		cfg := broker.DefaultConfig()
		cfg.DataDir, cfg.Listen, cfg.Token, cfg.AdminToken = dir, listen, "tok", "adm"
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		b, err := broker.Start(ctx, cfg)
		require.NoError(t, err)
		return b
	}
	srv := external("127.0.0.1:" + strconv.Itoa(brokertest.FreePort(t))) // restarted on it
	url := srv.ClientURL()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ext, err := broker.Start(ctx, broker.Config{URL: url, Token: "adm"})
	require.NoError(t, err)
	defer ext.Close()

	cnt := newCounter()
	entered, release := make(chan struct{}), make(chan struct{})
	r := &run{t: t, broker: ext, reg: func(reg *nodes.Registry) {
		require.NoError(t, reg.Register(nodes.Info{Type: "custom.echo", Handler: nodes.HandlerFunc(
			func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
				cnt.add(in)
				return &nodes.Outcome{Status: nodes.StatusSuccess, Response: in.Node.ID}, nil
			})}))
		require.NoError(t, reg.Register(nodes.Info{Type: "custom.hang", Handler: nodes.HandlerFunc(
			func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
				cnt.add(in)
				close(entered)
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				return &nodes.Outcome{Status: nodes.StatusSuccess, Response: "held"}, nil
			})}))
	}}
	cfg := r.durable(`digraph ride { start [shape=Mdiamond]; exit [shape=Msquare]
		a [type="custom.echo"]; b [type="custom.hang"]; c [type="custom.echo"]; d [type="custom.echo"]
		start -> a -> b -> c -> d -> exit }`, "ride")
	s, err := session.Start(ctx, cfg)
	require.NoError(t, err)
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("b never ran")
	}
	// The server goes away while b runs; b finishes while it is down (its
	// commit and publication wait), and the server comes back.
	require.NoError(t, srv.Close())
	close(release)
	srv = external(strings.TrimPrefix(url, "nats://"))
	defer srv.Close()

	rep, err := s.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status, rep.Reason)
	require.GreaterOrEqual(t, ext.Conn().Stats().Reconnects, uint64(1), "the connection went through the restart")
	for _, n := range []string{"a", "b", "c", "d"} {
		require.Equal(t, 1, cnt.get(n), "%s ran once", n)
	}
	hist, err := session.History(ctx, ext, "ride")
	require.NoError(t, err)
	consumed := map[string]int{}
	for _, h := range hist {
		for _, id := range h.ConsumedIDs {
			consumed[id]++
		}
	}
	require.Len(t, consumed, 6, "every envelope consumed: the input and five hand-offs")
	for id, n := range consumed {
		require.Equal(t, 1, n, "%s consumed once", id)
	}
}

// TestDurableStoreFull fills a small JetStream store: the session stops
// with a clear error, and its checkpoint is the last consistent state (it
// loads, its history has no gap, nothing after the failure is recorded).
func TestDurableStoreFull(t *testing.T) {
	b := brokertest.Start(t, brokertest.Configure(func(c *broker.Config) { c.MaxStore = 2 << 20 }))
	big := strings.Repeat("x", 200<<10)
	r := &run{t: t, broker: b, reg: func(reg *nodes.Registry) {
		require.NoError(t, reg.Register(nodes.Info{Type: "custom.echo", Handler: nodes.HandlerFunc(
			func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
				return &nodes.Outcome{Status: nodes.StatusSuccess, Response: big}, nil
			})}))
	}}
	cfg := r.durable(`digraph full { graph [max_visits=1000, stall_after=0]
		start [shape=Mdiamond]; exit [shape=Msquare]
		a [type="custom.echo"]; b [type="custom.echo"]
		start -> a -> b
		b -> a [condition="outcome=success"]
		b -> exit [condition="outcome=fail"] }`, "full")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := session.Start(ctx, cfg)
	require.NoError(t, err)
	rep, err := s.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "fail", rep.Status)
	require.Contains(t, rep.Reason, "insufficient resources")
	require.Regexp(t, `node [ab]: (checkpoint failed|publishing on sy\.full\.edge\.\w+\.\w+ failed)`, rep.Reason)

	hist, err := session.History(ctx, b, "full")
	require.NoError(t, err)
	for i, h := range hist {
		require.Equal(t, uint64(i+1), h.Seq, "no gap in the history")
	}
	cp, err := session.LoadCheckpoint(ctx, b, "full", 0)
	require.NoError(t, err)
	require.Equal(t, "running", cp.Status, "the stored state is the last consistent one, resumable once there is room")
	require.Equal(t, uint64(len(hist)), cp.Seq)
	require.NotEmpty(t, cp.Pending, "the token is pending in the checkpoint")
}

// TestDurableHumanWait: a question pending when the process dies is asked
// again after the restart and answered then; who answered and when are
// recorded in the checkpoint.
func TestDurableHumanWait(t *testing.T) {
	data := t.TempDir()
	start := func() *broker.Broker {
		return brokertest.Start(t, brokertest.Configure(func(c *broker.Config) { c.DataDir = data }))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfgFor := func(b *broker.Broker, questions chan *pb.Event) session.Config {
		r := &run{t: t, broker: b}
		g := r.load(gateSrc)
		return session.Config{ID: "gate", Graph: g, Broker: b, Durable: true,
			Deps: nodes.Deps{Providers: func(string) (agent.Provider, error) { return agent.NewMock(nil), nil }},
			Observer: func(ev *pb.Event) {
				if ev.Kind == "human.question" {
					questions <- ev
				}
			}}
	}
	q1 := make(chan *pb.Event, 4)
	b1 := start()
	s1, err := session.Start(ctx, cfgFor(b1, q1))
	require.NoError(t, err)
	require.Equal(t, "review", waitQuestion(t, q1).Node)
	s1.Stop() // the process dies with the question pending
	require.NoError(t, b1.Close())

	q2 := make(chan *pb.Event, 4)
	b2 := start()
	s2, err := session.Resume(ctx, cfgFor(b2, q2))
	require.NoError(t, err)
	require.Equal(t, "Ship it?", waitQuestion(t, q2).Message, "asked again after the restart")
	nc, err := b2.NewConn()
	require.NoError(t, err)
	defer nc.Close()
	data2, _ := json.Marshal(session.AnswerMessage{Node: "review", Choice: "A", By: "bob"})
	require.NoError(t, nc.Publish(broker.Control("gate", "answer"), data2))
	rep, err := s2.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status, rep.Reason)
	require.NotNil(t, rep.Node("ship"))
	cp, err := session.LoadCheckpoint(ctx, b2, "gate", 0)
	require.NoError(t, err)
	require.Equal(t, "bob", cp.Context["human.gate.answered_by"])
	at, err := time.Parse(time.RFC3339, cp.Context["human.gate.answered_at"])
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), at, time.Minute)
}

// TestDurableArtifacts: files a node declares go to the session's object
// store and travel by reference; the next node gets a checked copy in its
// stage directory.
func TestDurableArtifacts(t *testing.T) {
	r := newRun(t)
	work := t.TempDir()
	var got []nodes.Artifact
	var content string
	r.reg = func(reg *nodes.Registry) {
		require.NoError(t, reg.Register(nodes.Info{Type: "custom.echo", Handler: nodes.HandlerFunc(
			func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
				got = append(got, in.Messages[0].Artifacts...)
				for _, a := range in.Messages[0].Artifacts {
					data, err := os.ReadFile(a.Path)
					if err != nil {
						return nil, err
					}
					content = string(data)
				}
				return &nodes.Outcome{Status: nodes.StatusSuccess}, nil
			})}))
	}
	g := r.load(`digraph arts { start [shape=Mdiamond]; exit [shape=Msquare]
		make [shape=parallelogram, tool_command="mkdir -p out && printf 'findings' > out/report.txt", artifacts="out/*.txt, missing/*.bin"]
		check [type="custom.echo"]
		start -> make -> check -> exit }`)
	cfg := r.config(g)
	cfg.ID, cfg.Durable, cfg.WorkDir = "arts", true, work
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := session.Start(ctx, cfg)
	require.NoError(t, err)
	rep, err := s.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status, rep.Reason)
	require.Len(t, got, 1)
	a := got[0]
	require.Equal(t, "report.txt", a.Name, "a file name; the reference names the object")
	require.Equal(t, "obj://sy_obj_arts/make/1/out/report.txt", a.Ref)
	sum := sha256.Sum256([]byte("findings"))
	require.Equal(t, hex.EncodeToString(sum[:]), a.SHA256)
	require.Len(t, a.SHA256, 64)
	require.Equal(t, int64(len("findings")), a.Size)
	require.Equal(t, "findings", content)
	require.Equal(t, filepath.Join(r.logs, "check", "inputs", "make", "1", "out", "report.txt"), a.Path)
	data, err := broker.GetArtifact(ctx, r.broker.JetStream(), &pb.Artifact{Ref: a.Ref, Sha256: a.SHA256})
	require.NoError(t, err)
	require.Equal(t, "findings", string(data))
	_, err = broker.GetArtifact(ctx, r.broker.JetStream(), &pb.Artifact{Ref: a.Ref, Sha256: strings.Repeat("0", 64)})
	require.ErrorIs(t, err, broker.ErrArtifactMismatch)
}

// TestDurableSparseCheckpoints runs a durable session whose policy writes
// the journal every 3 firings, in batches: after a crash the firings
// since the last write run again — and only those — and the journal then
// has a record of every firing.
func TestDurableSparseCheckpoints(t *testing.T) {
	data := t.TempDir()
	src := `digraph d { start [shape=Mdiamond]; exit [shape=Msquare]
		a [type="custom.echo"]; b [type="custom.echo"]; c [type="custom.echo"]; d [type="custom.hang"]; e [type="custom.echo"]
		start -> a -> b -> c -> d -> e -> exit }`
	cnt := newCounter()
	var crashed sync.Once
	blocked := make(chan struct{})
	reg := func(reg *nodes.Registry) {
		require.NoError(t, reg.Register(nodes.Info{Type: "custom.echo", Handler: nodes.HandlerFunc(
			func(_ context.Context, in *nodes.Input) (*nodes.Outcome, error) {
				cnt.add(in)
				return &nodes.Outcome{Status: nodes.StatusSuccess, Response: in.Node.ID}, nil
			})}))
		require.NoError(t, reg.Register(nodes.Info{Type: "custom.hang", Handler: nodes.HandlerFunc(
			func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
				cnt.add(in)
				first := false
				crashed.Do(func() { first = true })
				if first {
					close(blocked)
					<-ctx.Done()
					return nil, ctx.Err()
				}
				return &nodes.Outcome{Status: nodes.StatusSuccess, Response: "d"}, nil
			})}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	policy := &session.CheckpointPolicy{EveryNodes: 3, Retain: true}

	b1 := brokertest.Start(t, brokertest.Configure(func(c *broker.Config) { c.DataDir = data }))
	r1 := &run{t: t, broker: b1, reg: reg}
	cfg := r1.config(r1.load(src))
	cfg.ID, cfg.Durable, cfg.LogsDir, cfg.Checkpoint = "sparse1", true, "", policy
	savedB := make(chan struct{})
	cfg.Observer = func(ev *pb.Event) {
		r1.observe(ev)
		if ev.Kind == "checkpoint.saved" && ev.Node == "b" {
			close(savedB)
		}
	}
	s1, err := session.Start(ctx, cfg)
	require.NoError(t, err)
	for _, ch := range []chan struct{}{blocked, savedB} {
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatal("d never started, or b's batch was never stored")
		}
	}
	// The crash: the server goes first, so the records held (c's) are
	// never written.
	require.NoError(t, b1.Close())
	s1.Stop()
	require.Equal(t, 3, r1.kinds()["checkpoint.saved"], "start, a and b (written as one batch); c's record was held")

	b2 := brokertest.Start(t, brokertest.Configure(func(c *broker.Config) { c.DataDir = data }))
	hist, err := session.History(ctx, b2, "sparse1")
	require.NoError(t, err)
	require.Len(t, hist, 4, "input, start, a, b: c's record was held when the process died")

	r2 := &run{t: t, broker: b2, reg: reg}
	cfg2 := r2.config(r2.load(src))
	cfg2.ID, cfg2.Durable, cfg2.LogsDir, cfg2.Checkpoint = "sparse1", true, "", policy
	s2, err := session.Resume(ctx, cfg2)
	require.NoError(t, err)
	rep, err := s2.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status, rep.Reason)
	require.Equal(t, 1, cnt.get("a"))
	require.Equal(t, 1, cnt.get("b"))
	require.Equal(t, 2, cnt.get("c"), "c's firing was not written: it runs again")
	require.Equal(t, 2, cnt.get("d"))
	require.Equal(t, 1, cnt.get("e"))

	hist, err = session.History(ctx, b2, "sparse1")
	require.NoError(t, err)
	var nodes []string
	for _, h := range hist {
		nodes = append(nodes, h.Node)
	}
	// d may consume what c's lost firing sent before c runs again (c's
	// second output has the same ids and is recognised): the order of the
	// two varies; every firing has exactly one record.
	require.ElementsMatch(t, []string{"", "start", "a", "b", "c", "d", "e", "exit"}, nodes, "every firing has its record")
}

// requestLog records the agent requests of a session's nodes.
type requestLog struct {
	mu   sync.Mutex
	reqs map[string][]agent.Request
}

func (l *requestLog) wrap(p agent.Provider) agent.Provider {
	return agentFunc(func(ctx context.Context, req *agent.Request, on func(agent.Event)) (*agent.Result, error) {
		l.mu.Lock()
		if l.reqs == nil {
			l.reqs = map[string][]agent.Request{}
		}
		l.reqs[req.NodeID] = append(l.reqs[req.NodeID], *req)
		l.mu.Unlock()
		return p.Run(ctx, req, on)
	})
}

func (l *requestLog) get(node string) []agent.Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]agent.Request(nil), l.reqs[node]...)
}

type agentFunc func(ctx context.Context, req *agent.Request, on func(agent.Event)) (*agent.Result, error)

func (agentFunc) Name() string { return "recorded" }
func (f agentFunc) Run(ctx context.Context, req *agent.Request, on func(agent.Event)) (*agent.Result, error) {
	return f(ctx, req, on)
}

// TestResumeAfterFullFidelity: a thread's CLI session from before a
// resume may be gone with the process that held it, so the first run on
// it after the resume starts afresh at summary:high (spec 5.4); the
// session it gets is live again for the next node.
func TestResumeAfterFullFidelity(t *testing.T) {
	data := t.TempDir()
	src := `digraph f { graph [goal="Ship it"]; start [shape=Mdiamond]; exit [shape=Msquare]
		a [prompt="Draft", fidelity=full, thread_id=work]; gate [type="custom.hang"]
		b [prompt="Refine", fidelity=full, thread_id=work]; c [prompt="Polish", fidelity=full, thread_id=work]
		start -> a -> gate -> b -> c -> exit }`
	var once sync.Once
	blocked := make(chan struct{})
	hang := nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
		first := false
		once.Do(func() { first = true })
		if first {
			close(blocked)
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return &nodes.Outcome{Status: nodes.StatusSuccess}, nil
	})
	log := &requestLog{}
	config := func(b *broker.Broker) session.Config {
		r := &run{t: t, broker: b}
		return session.Config{ID: "fid1", Graph: r.load(src), Broker: b, Durable: true,
			Handlers: map[string]nodes.Handler{"custom.hang": hang},
			Deps: nodes.Deps{Interviewer: nodes.AutoApprove{},
				Providers: func(string) (agent.Provider, error) { return log.wrap(agent.NewMock(nil)), nil }}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	b1 := brokertest.Start(t, brokertest.Configure(func(c *broker.Config) { c.DataDir = data }))
	s1, err := session.Start(ctx, config(b1))
	require.NoError(t, err)
	select {
	case <-blocked:
	case <-ctx.Done():
		t.Fatal("the gate never ran")
	}
	s1.Stop()
	require.NoError(t, b1.Close())

	b2 := brokertest.Start(t, brokertest.Configure(func(c *broker.Config) { c.DataDir = data }))
	s2, err := session.Resume(ctx, config(b2))
	require.NoError(t, err)
	rep, err := s2.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status, rep.Reason)

	a, b, c := log.get("a"), log.get("b"), log.get("c")
	require.Len(t, a, 1)
	require.Len(t, b, 1)
	require.Len(t, c, 1)
	require.Empty(t, b[0].ResumeSession, "the session from before the resume is not resumed")
	require.Equal(t, "summary:high", b[0].Fidelity)
	require.Contains(t, b[0].Prompt, "Goal: Ship it", "afresh, with a summary")
	require.Equal(t, "mock-b", c[0].ResumeSession, "the new session is live")
	require.Equal(t, "full", c[0].Fidelity)
}
