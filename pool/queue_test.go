package pool_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/pool"
)

// On a cluster, a worker started before any session makes the work
// stream; the first session's dispatcher (replicas 3) scales it up. Its
// first jobs are queued, not failed, while the stream moves.
func TestDispatchWhileWorkStreamScalesUp(t *testing.T) {
	if testing.Short() {
		t.Skip("a three-server cluster: not with -short")
	}
	cl := brokertest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := broker.Start(ctx, broker.Config{URL: cl.URL()})
	require.NoError(t, err)
	defer b.Close()
	reg := nodes.NewRegistry()
	require.NoError(t, nodes.RegisterBuiltins(reg, nodes.Deps{}))
	wctx, wstop := context.WithCancel(ctx)
	w := &pool.Worker{NC: b.Conn(), JS: b.JetStream(), Pool: "p", Registry: reg, WorkDir: t.TempDir()}
	wdone := make(chan error, 1)
	go func() { wdone <- w.Run(wctx) }()
	defer func() { wstop(); <-wdone }()
	for {
		if _, err := b.JetStream().Stream(ctx, pool.Stream); err == nil {
			break
		}
		require.NoError(t, ctx.Err())
		time.Sleep(20 * time.Millisecond)
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
	for want := 2; want <= 3; want++ {
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
