package pool_test

import (
	"context"
	"io"
	"log/slog"
	"net"
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
	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/pool"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// On a cluster, a worker started before any session makes the work
// stream; the first session's dispatcher (replicas 3) scales it up. Its
// first jobs are queued, not failed, while the stream moves.
func TestDispatchWhileWorkStreamScalesUp(t *testing.T) {
	if testing.Short() {
		t.Skip("a three-server cluster: not with -short")
	}
	cl := brokertest.StartCluster(t, 3)
	// Alone it takes 3 s under the race detector; beside the other
	// packages' tests on 2 cores, the cluster once took more than a minute
	// to make the work stream.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b, err := broker.Start(ctx, broker.Config{URL: cl.URL()})
	require.NoError(t, err)
	defer b.Close()
	reg := nodes.NewRegistry()
	require.NoError(t, nodes.RegisterBuiltins(reg, nodes.Deps{}))
	wctx, wstop := context.WithCancel(ctx)
	w := &pool.Worker{NC: b.Conn(), JS: b.JetStream(), Pool: "p", Registry: reg, WorkDir: t.TempDir(),
		Log: brokertest.Logger(t, slog.LevelInfo)}
	wdone := make(chan error, 1)
	go func() { wdone <- w.Run(wctx) }()
	defer func() { wstop(); <-wdone }()
	for {
		// Each look is bounded: a request whose answer a loaded cluster
		// lost (a meta leader election) would else wait for ctx's end.
		lctx, lcancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := b.JetStream().Stream(lctx, pool.Stream)
		lcancel()
		if err == nil {
			break
		}
		require.NoError(t, ctx.Err(), "the worker made no work stream; last look: %v", err)
		time.Sleep(20 * time.Millisecond) // polling the cluster for the worker's stream
	}

	g, err := graph.Parse("r.dot", []byte(`digraph R { start [shape=Mdiamond]; x [shape=parallelogram, pool=p, tool_command="echo hi"]; exit [shape=Msquare]; start -> x -> exit }`))
	require.NoError(t, err)
	d := &pool.Dispatcher{NC: b.Conn(), JS: b.JetStream(), Storage: b.Storage(), Replicas: 3}
	h, err := d.Handler("p")
	require.NoError(t, err)
	for i := 1; i <= 3; i++ {
		in := &nodes.Input{SessionID: "s", Graph: g, Node: g.Node("x"), Type: "tool", Attempt: 1,
			AttemptID: "s/x/" + string(rune('0'+i)) + "/1", Context: map[string]string{}}
		began := time.Now()
		o, err := h.Handle(ctx, in)
		require.NoError(t, err)
		require.Equal(t, nodes.StatusSuccess, o.Status, o.FailureReason)
		t.Logf("job %d: %v", i, time.Since(began))
	}
	st, err := b.JetStream().Stream(ctx, pool.Stream)
	require.NoError(t, err)
	require.Equal(t, 3, st.CachedInfo().Config.Replicas)
}

// An owner died after its job ran: the worker acknowledged the job, and
// the outcome went to the dead owner. The owner that takes the session
// over runs the firing again with the same attempt id and finds the
// outcome kept by the outcome stream: the job does not run again. Where
// the outcome was not kept (the stream lost it, or a worker published it
// before the stream existed) the stream's deduplication would drop the
// job's publication (the same message id), so it is queued again under the
// attempt's next id and run again, and the new owner gets its outcome. A
// job still in the stream is left to its worker instead: it runs once.
func TestDispatchAgainAfterTakeover(t *testing.T) {
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	g, err := graph.Parse("r.dot", []byte(`digraph R { start [shape=Mdiamond]; x [shape=parallelogram, pool=p, tool_command="echo $SWITCHYARD_ATTEMPT_ID >> runs; echo done"]; exit [shape=Msquare]; start -> x -> exit }`))
	require.NoError(t, err)
	reg := nodes.NewRegistry()
	require.NoError(t, nodes.RegisterBuiltins(reg, nodes.Deps{}))
	runWorker := func() func() {
		wctx, wstop := context.WithCancel(ctx)
		w := &pool.Worker{NC: b.Conn(), JS: b.JetStream(), Pool: "p", Registry: reg, WorkDir: dir, AckWait: time.Second}
		wdone := make(chan error, 1)
		go func() { wdone <- w.Run(wctx) }()
		return func() { wstop(); require.NoError(t, <-wdone) }
	}
	input := func(firing string) *nodes.Input {
		return &nodes.Input{SessionID: "s", Graph: g, Node: g.Node("x"), Type: "tool", Attempt: 1,
			AttemptID: "s/x/" + firing + "/1", Context: map[string]string{}}
	}
	runs := func() []string {
		data, _ := os.ReadFile(filepath.Join(dir, "runs"))
		return strings.Fields(string(data))
	}

	// The job of firing 1 ran and was acknowledged; its owner died.
	stopWorker := runWorker()
	first := &pool.Dispatcher{NC: b.Conn(), JS: b.JetStream(), Storage: b.Storage()}
	h, err := first.Handler("p")
	require.NoError(t, err)
	o, err := h.Handle(ctx, input("1"))
	require.NoError(t, err)
	require.Equal(t, nodes.StatusSuccess, o.Status)
	// The new owner runs the firing again: the kept outcome is its result.
	taker := &pool.Dispatcher{NC: b.Conn(), JS: b.JetStream(), Storage: b.Storage()}
	h, err = taker.Handler("p")
	require.NoError(t, err)
	o, err = h.Handle(ctx, input("1"))
	require.NoError(t, err)
	require.Equal(t, nodes.StatusSuccess, o.Status)
	require.Equal(t, "done", o.Response)
	require.Equal(t, []string{"s/x/1/1"}, runs(), "not run again")
	// Without the kept outcome: queued again and run again, with the same
	// attempt id; and once more for a third owner.
	outs, err := b.JetStream().Stream(ctx, pool.OutcomeStream)
	require.NoError(t, err)
	work, err := b.JetStream().Stream(ctx, pool.Stream)
	require.NoError(t, err)
	for want := 2; want <= 3; want++ {
		// The last run's outcome reached its owner as the stream stored it,
		// and its worker acknowledges the job after that: the outcome is
		// purged once it is stored (else it lands after the purge) and the
		// job is gone from the work stream (else the next owner finds it
		// held and waits for its outcome, which the purge took).
		for {
			oi, err := outs.Info(ctx)
			require.NoError(t, err)
			wi, err := work.Info(ctx)
			require.NoError(t, err)
			if oi.State.Msgs > 0 && wi.State.Msgs == 0 {
				break
			}
			time.Sleep(5 * time.Millisecond) // polling the streams
		}
		require.NoError(t, outs.Purge(ctx))
		h, err = (&pool.Dispatcher{NC: b.Conn(), JS: b.JetStream(), Storage: b.Storage()}).Handler("p")
		require.NoError(t, err)
		o, err = h.Handle(ctx, input("1"))
		require.NoError(t, err)
		require.Equal(t, "done", o.Response)
		require.Len(t, runs(), want)
		require.Equal(t, "s/x/1/1", runs()[want-1], "run again, with the same attempt id")
	}
	stopWorker()

	// Firing 2's job is queued while no worker runs; its owner dies. The
	// new owner finds it in the stream and waits for its outcome: one run.
	hctx, hcancel := context.WithCancel(ctx)
	queued := make(chan struct{})
	in := input("2")
	in.Emit = func(kind string, _ map[string]any) {
		if kind == "work.queued" {
			close(queued)
		}
	}
	h, err = (&pool.Dispatcher{NC: b.Conn(), JS: b.JetStream(), Storage: b.Storage()}).Handler("p")
	require.NoError(t, err)
	dead := make(chan error, 1)
	go func() { _, err := h.Handle(hctx, in); dead <- err }()
	<-queued
	hcancel()
	require.ErrorIs(t, <-dead, context.Canceled)
	h, err = taker.Handler("p")
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() { o, err = h.Handle(ctx, input("2")); got <- err }()
	stopWorker = runWorker()
	defer stopWorker()
	require.NoError(t, <-got)
	require.Equal(t, "done", o.Response)
	require.Equal(t, []string{"s/x/1/1", "s/x/1/1", "s/x/1/1", "s/x/2/1"}, runs(), "firing 2 ran once")
	// And a later owner of firing 2 takes its kept outcome.
	h, err = (&pool.Dispatcher{NC: b.Conn(), JS: b.JetStream(), Storage: b.Storage()}).Handler("p")
	require.NoError(t, err)
	o, err = h.Handle(ctx, input("2"))
	require.NoError(t, err)
	require.Equal(t, "done", o.Response)
	require.Len(t, runs(), 4)
}

// An owner whose connection was away when its job's outcome was published
// (core NATS does not keep the message for it) reads the outcome from the
// outcome stream, where the worker stored it before it acknowledged the
// job. The owner's connection goes through a proxy the test cuts.
func TestDispatchOutcomeMissedWhileAway(t *testing.T) {
	b := brokertest.Start(t, brokertest.Listen("out", "adm"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g, err := graph.Parse("r.dot", []byte(`digraph R { start [shape=Mdiamond]; x [shape=parallelogram, pool=p, tool_command="echo done"]; exit [shape=Msquare]; start -> x -> exit }`))
	require.NoError(t, err)
	px := newProxy(t, strings.TrimPrefix(b.ClientURL(), "nats://"))
	down, up := make(chan struct{}, 1), make(chan struct{}, 1)
	nc, err := nats.Connect("nats://"+px.addr(), nats.Token("adm"), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond),
		nats.DisconnectErrHandler(func(*nats.Conn, error) { down <- struct{}{} }),
		nats.ReconnectHandler(func(*nats.Conn) { up <- struct{}{} }))
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	clk := clock.NewFake(time.Now())
	h, err := (&pool.Dispatcher{NC: nc, JS: js, Storage: b.Storage(), Clock: clk}).Handler("p")
	require.NoError(t, err)

	type result struct {
		o   *nodes.Outcome
		err error
	}
	res := make(chan result, 1)
	queued := make(chan struct{})
	in := &nodes.Input{SessionID: "s", Graph: g, Node: g.Node("x"), Type: "tool", Attempt: 1, AttemptID: "s/x/1/1",
		Context: map[string]string{}, Emit: func(kind string, _ map[string]any) {
			if kind == "work.queued" {
				close(queued)
			}
		}}
	go func() { o, err := h.Handle(ctx, in); res <- result{o, err} }()
	<-queued
	px.cut()
	<-down
	// The job runs and is acknowledged while the owner is away.
	reg := nodes.NewRegistry()
	require.NoError(t, nodes.RegisterBuiltins(reg, nodes.Deps{}))
	wctx, wstop := context.WithCancel(ctx)
	w := &pool.Worker{NC: b.Conn(), JS: b.JetStream(), Pool: "p", Registry: reg, WorkDir: t.TempDir()}
	wdone := make(chan error, 1)
	go func() { wdone <- w.Run(wctx) }()
	defer func() { wstop(); require.NoError(t, <-wdone) }()
	st, err := b.JetStream().Stream(ctx, pool.OutcomeStream)
	require.NoError(t, err)
	for {
		if _, err := st.GetLastMsgForSubject(ctx, pool.ReplySubject("s", "x", 1, 1)); err == nil {
			break
		}
		require.NoError(t, ctx.Err(), "the outcome was never stored")
		time.Sleep(10 * time.Millisecond) // polling the stream
	}
	px.restore()
	<-up
	for {
		clk.Advance(pool.OutcomePoll)
		select {
		case r := <-res:
			require.NoError(t, r.err)
			require.Equal(t, "done", r.o.Response)
			return
		case <-ctx.Done():
			t.Fatal("the owner never took the outcome")
		case <-time.After(50 * time.Millisecond): // the next poll
		}
	}
}

// proxy forwards TCP connections to a server until cut: then it closes
// them and refuses new ones until restored.
type proxy struct {
	t      *testing.T
	l      net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	closed bool
	wg     sync.WaitGroup
}

func newProxy(t *testing.T, target string) *proxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{t: t, l: l, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() { _ = l.Close(); p.cut(); p.wg.Wait() })
	return p
}

func (p *proxy) addr() string { return p.l.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.conns = append(p.conns, c, s)
		p.wg.Add(2)
		go func() { defer p.wg.Done(); _, _ = io.Copy(s, c); _ = s.Close() }()
		go func() { defer p.wg.Done(); _, _ = io.Copy(c, s); _ = c.Close() }()
		p.mu.Unlock()
	}
}

// cut closes every forwarded connection and refuses new ones.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// restore forwards new connections again.
func (p *proxy) restore() {
	p.mu.Lock()
	p.closed = false
	p.mu.Unlock()
}

// A worker may publish outcomes, but not plant one for an attempt it was
// not given: with a key, an attempt's reply subject ends with a tag only
// the session can compute, so an outcome published in advance on the
// guessable subject (or with another key's tag) is neither heard nor found
// kept; the job runs. An owner with the same key (the session's next
// owner) finds the real outcome kept.
func TestPlantedOutcomeRefused(t *testing.T) {
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	g, err := graph.Parse("r.dot", []byte(`digraph R { start [shape=Mdiamond]; x [shape=parallelogram, pool=p, tool_command="echo $SWITCHYARD_ATTEMPT_ID >> runs; echo real"]; exit [shape=Msquare]; start -> x -> exit }`))
	require.NoError(t, err)
	reg := nodes.NewRegistry()
	require.NoError(t, nodes.RegisterBuiltins(reg, nodes.Deps{}))
	key := []byte("0123456789abcdef0123456789abcdef")
	in := func() *nodes.Input {
		return &nodes.Input{SessionID: "s", Graph: g, Node: g.Node("x"), Type: "tool", Attempt: 1,
			AttemptID: "s/x/1/1", Context: map[string]string{}}
	}
	// The stream exists (an earlier job of any session made it).
	require.NoError(t, pool.EnsureStream(ctx, b.JetStream(), b.Storage(), 1))
	forged, err := proto.Marshal(pool.ToEnvelope(&pb.Envelope{Id: "s/x/1/1", SessionId: "s", ToNode: "x"},
		&nodes.Outcome{Status: nodes.StatusSuccess, Response: "forged"}))
	require.NoError(t, err)
	for _, subj := range []string{pool.ReplySubject("s", "x", 1, 1),
		pool.ReplySubject("s", "x", 1, 1) + "." + pool.ReplyTag([]byte("another key, another session...."), "s/x/1/1")} {
		_, err := b.JetStream().Publish(ctx, subj, forged)
		require.NoError(t, err)
	}

	wctx, wstop := context.WithCancel(ctx)
	w := &pool.Worker{NC: b.Conn(), JS: b.JetStream(), Pool: "p", Registry: reg, WorkDir: dir}
	wdone := make(chan error, 1)
	go func() { wdone <- w.Run(wctx) }()
	defer func() { wstop(); require.NoError(t, <-wdone) }()
	for _, want := range []int{1, 1} { // the owner, then its successor
		h, err := (&pool.Dispatcher{NC: b.Conn(), JS: b.JetStream(), Storage: b.Storage(), Key: key}).Handler("p")
		require.NoError(t, err)
		o, err := h.Handle(ctx, in())
		require.NoError(t, err)
		require.Equal(t, "real", strings.TrimSpace(o.Response))
		data, err := os.ReadFile(filepath.Join(dir, "runs"))
		require.NoError(t, err)
		require.Len(t, strings.Fields(string(data)), want, "the job ran once")
	}
}

// A worker whose connection is closed for good (it gave up reconnecting)
// ends with nats.ErrConnectionClosed instead of waiting or pulling on it
// forever (its supervisor starts it again), wherever it is: closed before
// it starts (it waits for the work stream on it), or once it made its
// consumer (it may still be waiting for the answer, or pulling).
func TestWorkerEndsWhenItsConnectionCloses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before bool // close before Run
	}{{"before it starts", true}, {"once its consumer exists", false}} {
		t.Run(tc.name, func(t *testing.T) {
			b := brokertest.Start(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			reg := nodes.NewRegistry()
			require.NoError(t, nodes.RegisterBuiltins(reg, nodes.Deps{}))
			nc, err := b.NewConn()
			require.NoError(t, err)
			js, err := jetstream.New(nc)
			require.NoError(t, err)
			if tc.before {
				nc.Close()
			}
			w := &pool.Worker{NC: nc, JS: js, Pool: "p", Registry: reg, WorkDir: t.TempDir(), Concurrency: 2}
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx) }()
			if !tc.before {
				for {
					if _, err := b.JetStream().Consumer(ctx, pool.Stream, pool.ConsumerName("p")); err == nil {
						break
					}
					require.NoError(t, ctx.Err(), "the worker never made its consumer")
					time.Sleep(10 * time.Millisecond) // polling the server
				}
				nc.Close()
			}
			select {
			case err := <-done:
				require.ErrorIs(t, err, nats.ErrConnectionClosed)
			case <-ctx.Done():
				t.Fatal("the worker went on after its connection closed")
			}
		})
	}
}

// A new session that reuses an id (Fresh) does not have the jobs an
// earlier session of that id left queued run beside its own: they are
// purged before its first job, and by Forget when it starts. An owner
// that takes a session over (not Fresh) keeps its predecessor's queued
// jobs: they are its own, and run once (TestDispatchAgainAfterTakeover).
func TestEarlierSessionsJobsDoNotRun(t *testing.T) {
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	g, err := graph.Parse("r.dot", []byte(`digraph R { start [shape=Mdiamond]; x [shape=parallelogram, pool=p, tool_command="echo $SWITCHYARD_ATTEMPT_ID >> runs; echo done"]; exit [shape=Msquare]; start -> x -> exit }`))
	require.NoError(t, err)
	reg := nodes.NewRegistry()
	require.NoError(t, nodes.RegisterBuiltins(reg, nodes.Deps{}))
	input := func(firing string) *nodes.Input {
		return &nodes.Input{SessionID: "s", Graph: g, Node: g.Node("x"), Type: "tool", Attempt: 1,
			AttemptID: "s/x/" + firing + "/1", Context: map[string]string{}}
	}
	runs := func() []string {
		data, _ := os.ReadFile(filepath.Join(dir, "runs"))
		return strings.Fields(string(data))
	}
	dispatcher := func(key string, fresh bool) *pool.Dispatcher {
		return &pool.Dispatcher{NC: b.Conn(), JS: b.JetStream(), Storage: b.Storage(), Key: []byte(key), Fresh: fresh}
	}
	// queueAndDie queues firing's job with no worker running; its owner dies.
	queueAndDie := func(d *pool.Dispatcher, firing string) {
		t.Helper()
		hctx, hcancel := context.WithCancel(ctx)
		queued := make(chan struct{})
		in := input(firing)
		in.Emit = func(kind string, _ map[string]any) {
			if kind == "work.queued" {
				close(queued)
			}
		}
		h, err := d.Handler("p")
		require.NoError(t, err)
		dead := make(chan error, 1)
		go func() { _, err := h.Handle(hctx, in); dead <- err }()
		select {
		case <-queued:
		case <-ctx.Done():
			t.Fatal("not queued")
		}
		hcancel()
		require.ErrorIs(t, <-dead, context.Canceled)
	}
	queuedOf := func() uint64 {
		t.Helper()
		st, err := b.JetStream().Stream(ctx, pool.Stream)
		require.NoError(t, err)
		info, err := st.Info(ctx, jetstream.WithSubjectFilter("syw.*.s.>"))
		require.NoError(t, err)
		var n uint64
		for _, c := range info.State.Subjects {
			n += c
		}
		return n
	}

	// The earlier session queued firing 1's job and went away (its store
	// collected); a new session of the same id, another key, fires its
	// own firing 1.
	queueAndDie(dispatcher("the earlier session's key.......", true), "1")
	h, err := dispatcher("the new session's key...........", true).Handler("p")
	require.NoError(t, err)
	got := make(chan error, 1)
	var o *nodes.Outcome
	queued := make(chan string, 1)
	in := input("1")
	in.Emit = func(kind string, _ map[string]any) {
		if kind == "work.queued" || kind == "work.held" {
			queued <- kind
		}
	}
	go func() { o, err = h.Handle(ctx, in); got <- err }()
	select { // both jobs are there when the worker starts, unless purged
	case kind := <-queued:
		// Held: the earlier session's job counted as this one's, whose
		// outcome goes where this session does not listen.
		require.Equal(t, "work.queued", kind, "the new session's job is its own")
	case <-ctx.Done():
		t.Fatal("not queued")
	}
	wctx, wstop := context.WithCancel(ctx)
	w := &pool.Worker{NC: b.Conn(), JS: b.JetStream(), Pool: "p", Registry: reg, WorkDir: dir}
	wdone := make(chan error, 1)
	go func() { wdone <- w.Run(wctx) }()
	defer func() { wstop(); require.NoError(t, <-wdone) }()
	require.NoError(t, <-got)
	require.Equal(t, "done", o.Response)
	require.Equal(t, []string{"s/x/1/1"}, runs(), "the earlier session's job did not run")
	wstop()
	require.NoError(t, <-wdone)
	wdone <- nil

	// Forget, at a new session's start, purges what an earlier one left
	// queued; for an owner that takes a session over it keeps them.
	queueAndDie(dispatcher("the third key...................", true), "2")
	require.EqualValues(t, 1, queuedOf())
	require.NoError(t, dispatcher("the third key...................", false).Forget(ctx, "s"))
	require.EqualValues(t, 1, queuedOf(), "a takeover keeps its predecessor's jobs")
	require.NoError(t, dispatcher("the fourth key..................", true).Forget(ctx, "s"))
	require.EqualValues(t, 0, queuedOf(), "a new session forgets an earlier one's jobs")
}
