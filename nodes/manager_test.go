package nodes_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/nodes"
)

// fakeChild is a child pipeline the test drives.
type fakeChild struct {
	mu       sync.Mutex
	status   nodes.ChildStatus
	steered  []string
	stopped  bool
	done     chan struct{}
	observed chan nodes.ChildStatus // one per Status call
}

func newFakeChild() *fakeChild {
	return &fakeChild{status: nodes.ChildStatus{State: "running", CurrentNode: "build"},
		done: make(chan struct{}), observed: make(chan nodes.ChildStatus, 100)}
}

func (c *fakeChild) Status() nodes.ChildStatus {
	c.mu.Lock()
	st := c.status
	c.mu.Unlock()
	c.observed <- st
	return st
}

func (c *fakeChild) Steer(_ context.Context, msg string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.steered = append(c.steered, msg)
	return nil
}

func (c *fakeChild) Done() <-chan struct{} { return c.done }

func (c *fakeChild) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
}

func (c *fakeChild) set(f func(st *nodes.ChildStatus)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(&c.status)
}

func (c *fakeChild) finish(state, outcome string) {
	c.set(func(st *nodes.ChildStatus) { st.State, st.Outcome = state, outcome })
	close(c.done)
}

func (c *fakeChild) snapshot() (steered []string, stopped bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.steered...), c.stopped
}

// fakeRunner starts the fake child, recording what it was asked to run.
type fakeRunner struct {
	child            *fakeChild
	err              error
	dotfile, workdir string
}

func (r *fakeRunner) Start(_ context.Context, dotfile, workdir string) (nodes.Child, error) {
	r.dotfile, r.workdir = dotfile, workdir
	if r.err != nil {
		return nil, r.err
	}
	return r.child, nil
}

const managerGraph = `digraph m { stack.child_dotfile="child.dot"; start [shape=Mdiamond]; boss [shape=house%s]; exit [shape=Msquare]; start -> boss -> exit }`

// supervise runs the manager node with attrs in the background.
type supervision struct {
	clk    *clock.Fake
	child  *fakeChild
	runner *fakeRunner
	cancel context.CancelFunc
	done   chan result
}

type result struct {
	o   *nodes.Outcome
	err error
}

func supervise(t *testing.T, attrs string) *supervision {
	t.Helper()
	s := &supervision{clk: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), child: newFakeChild(), done: make(chan result, 1)}
	s.runner = &fakeRunner{child: s.child}
	g, _ := loadLoose(t, fmt.Sprintf(managerGraph, attrs))
	r := registry(t, nodes.Deps{Children: s.runner, Clock: s.clk})
	h, _ := r.Lookup("stack.manager_loop")
	in := input(t, g, "boss")
	in.Context["phase"] = "two"
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	t.Cleanup(cancel)
	go func() {
		o, err := h.Handle(ctx, in)
		s.done <- result{o, err}
	}()
	return s
}

// cycle waits for the manager to observe the child and arm its poll timer.
func (s *supervision) cycle(t *testing.T) nodes.ChildStatus {
	t.Helper()
	st := receive(t, s.child.observed)
	waitArmed(t, s.clk)
	return st
}

// waitArmed waits until the fake clock has a pending timer.
func waitArmed(t *testing.T, clk *clock.Fake) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		changed := clk.Changed()
		if clk.Pending() > 0 {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatal("no timer was armed within 10s")
		}
	}
}

func TestManagerChildEnds(t *testing.T) {
	tests := []struct {
		name, state, outcome string
		want                 nodes.Status
	}{
		{"completed with success", "completed", "success", nodes.StatusSuccess},
		{"completed with partial success", "completed", "partial_success", nodes.StatusSuccess},
		{"completed with failure", "completed", "fail", nodes.StatusFail},
		{"failed", "failed", "fail", nodes.StatusFail},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := supervise(t, "")
			s.cycle(t)
			s.child.finish(tc.state, tc.outcome)
			r := receive(t, s.done)
			require.NoError(t, r.err)
			require.Equal(t, tc.want, r.o.Status, r.o.FailureReason)
			require.Equal(t, tc.state, r.o.ContextUpdates["stack.child.status"])
			require.Equal(t, tc.outcome, r.o.ContextUpdates["stack.child.outcome"])
			require.Equal(t, "2", r.o.ContextUpdates["stack.manager.cycles"], "the end is observed at once, without waiting for the poll")
			_, stopped := s.child.snapshot()
			require.True(t, stopped)
			require.Equal(t, "child.dot", s.runner.dotfile)
		})
	}
}

func TestManagerPollsOnTheClock(t *testing.T) {
	s := supervise(t, "")
	require.Equal(t, "build", s.cycle(t).CurrentNode)
	s.clk.Advance(44 * time.Second)
	select {
	case <-s.child.observed:
		t.Fatal("observed again before the 45s default poll interval")
	default:
	}
	s.clk.Advance(time.Second)
	s.cycle(t)
	s.child.set(func(st *nodes.ChildStatus) { st.CurrentNode = "test" })
	s.clk.Advance(45 * time.Second)
	require.Equal(t, "test", s.cycle(t).CurrentNode)
	s.child.finish("completed", "success")
	r := receive(t, s.done)
	require.Equal(t, "test", r.o.ContextUpdates["stack.child.current_node"])
}

func TestManagerStopCondition(t *testing.T) {
	tests := []struct {
		name, cond string
	}{
		{"child status key", `stack.child.current_node=review`},
		{"context. prefix", `context.stack.child.current_node=review && phase=two`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := supervise(t, `, manager.poll_interval="10s", manager.stop_condition="`+tc.cond+`"`)
			s.cycle(t)
			s.child.set(func(st *nodes.ChildStatus) { st.CurrentNode = "review" })
			s.clk.Advance(10 * time.Second)
			r := receive(t, s.done)
			require.NoError(t, r.err)
			require.Equal(t, nodes.StatusSuccess, r.o.Status)
			require.Equal(t, "running", r.o.ContextUpdates["stack.child.status"])
			require.Contains(t, r.o.Notes, "stop condition")
			_, stopped := s.child.snapshot()
			require.True(t, stopped, "the child is stopped when the manager ends")
		})
	}
}

func TestManagerMaxCycles(t *testing.T) {
	s := supervise(t, `, manager.poll_interval="1s", manager.max_cycles=3`)
	for range 3 {
		s.cycle(t)
		s.clk.Advance(time.Second)
	}
	r := receive(t, s.done)
	require.NoError(t, r.err)
	require.Equal(t, nodes.StatusFail, r.o.Status)
	require.Contains(t, r.o.FailureReason, "max_cycles")
	require.Equal(t, "3", r.o.ContextUpdates["stack.manager.cycles"])
}

func TestManagerSteers(t *testing.T) {
	s := supervise(t, `, manager.actions="observe,steer,wait", manager.steer_prompt="focus on tests", manager.poll_interval="1s"`)
	s.cycle(t)
	s.clk.Advance(time.Second)
	s.cycle(t)
	steered, _ := s.child.snapshot()
	require.Equal(t, []string{"focus on tests", "focus on tests"}, steered)
	s.child.finish("completed", "success")
	require.Equal(t, nodes.StatusSuccess, receive(t, s.done).o.Status)

	s = supervise(t, `, manager.steer_prompt="ignored without the steer action", manager.poll_interval="1s"`)
	s.cycle(t)
	s.child.finish("completed", "success")
	receive(t, s.done)
	steered, _ = s.child.snapshot()
	require.Empty(t, steered)
}

func TestManagerCancelled(t *testing.T) {
	s := supervise(t, "")
	s.cycle(t)
	s.cancel()
	r := receive(t, s.done)
	require.ErrorIs(t, r.err, context.Canceled)
	_, stopped := s.child.snapshot()
	require.True(t, stopped)
}

func TestManagerConfigurationErrors(t *testing.T) {
	tests := []struct {
		name   string
		src    string
		runner nodes.ChildRunner
		reason string
	}{
		{"no child runner", fmt.Sprintf(managerGraph, ""), nil, "no child runner"},
		{"no dotfile", `digraph m { start [shape=Mdiamond]; boss [shape=house]; exit [shape=Msquare]; start -> boss -> exit }`, &fakeRunner{child: newFakeChild()}, "stack.child_dotfile"},
		{"bad stop condition", fmt.Sprintf(managerGraph, `, manager.stop_condition="a=="`), &fakeRunner{child: newFakeChild()}, "manager.stop_condition"},
		{"start fails", fmt.Sprintf(managerGraph, ""), &fakeRunner{err: errors.New("no such file")}, "no such file"},
		{"autostart off", fmt.Sprintf(managerGraph, `, stack.child_autostart=false`), &fakeRunner{child: newFakeChild()}, "autostart"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, _ := loadLoose(t, tc.src)
			r := registry(t, nodes.Deps{Children: tc.runner, Clock: clock.NewFake(time.Now())})
			o := handle(t, r, input(t, g, "boss"))
			require.Equal(t, nodes.StatusFail, o.Status)
			require.Contains(t, o.FailureReason, tc.reason)
		})
	}
}

func TestManagerChildWorkdir(t *testing.T) {
	s := supervise(t, `, stack.child_workdir="/tmp/child"`)
	s.cycle(t)
	s.child.finish("completed", "success")
	receive(t, s.done)
	require.Equal(t, "/tmp/child", s.runner.workdir)
}
