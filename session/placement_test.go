package session_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/session"
)

func TestPlaceSpreadsAndMatchesLabels(t *testing.T) {
	gpu := map[string]string{"gpu": "true"}
	members := []session.Member{
		{ID: "c", All: true, Labels: gpu},
		{ID: "a", All: true},
		{ID: "b", All: true, Load: 1},
	}
	var wanted []session.Wanted
	for i := range 6 {
		wanted = append(wanted, session.Wanted{ID: fmt.Sprintf("s%d", i)})
	}
	plan := session.Place(wanted, members)
	per := map[string]int{}
	for _, w := range wanted {
		per[plan[w.ID]]++
	}
	// Loads 0, 1, 0 and six sessions: 7 in all over three members.
	require.Equal(t, map[string]int{"a": 3, "b": 1, "c": 2}, per, "%v", plan)
	require.Equal(t, plan, session.Place(wanted, []session.Member{members[2], members[0], members[1]}), "the same plan in any order")

	plan = session.Place([]session.Wanted{{ID: "g1", Labels: gpu}, {ID: "g2", Labels: gpu}, {ID: "x", Labels: map[string]string{"gpu": "false"}}}, members)
	require.Equal(t, map[string]string{"g1": "c", "g2": "c", "x": ""}, plan)

	// A member of files runs only their sessions.
	files := []session.Member{{ID: "f", Files: []string{"/a.dot"}}}
	plan = session.Place([]session.Wanted{{ID: "1", File: "/a.dot"}, {ID: "2", File: "/b.dot"}}, files)
	require.Equal(t, map[string]string{"1": "f", "2": ""}, plan)
}

func TestParseLabels(t *testing.T) {
	l, err := session.ParseLabels(" gpu=true, zone=eu-1 ")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"gpu": "true", "zone": "eu-1"}, l)
	require.Equal(t, "gpu=true,zone=eu-1", session.FormatLabels(l))
	l, err = session.ParseLabels("")
	require.NoError(t, err)
	require.Empty(t, l)
	for _, bad := range []string{"gpu", "=x", "a=", "a=b,a=c", "a b=c", "a=b;c", "a=b,,"} {
		_, err := session.ParseLabels(bad)
		require.Error(t, err, bad)
	}
}

// Members: joined members are listed with their labels and load; one that
// left is not; an entry naming a dead process of this host is not live.
func TestMembership(t *testing.T) {
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := session.Join(ctx, b, session.Member{All: true, Labels: map[string]string{"gpu": "true"}}, nil, time.Second, 1)
	require.NoError(t, err)
	defer a.Leave()
	c, err := session.Join(ctx, b, session.Member{ID: "other", Files: []string{"/x.dot"}}, nil, time.Second, 1)
	require.NoError(t, err)
	c.SetLoad(ctx, 2)
	ms, err := a.Members(ctx)
	require.NoError(t, err)
	require.Len(t, ms, 2)
	byID := map[string]session.Member{}
	for _, m := range ms {
		byID[m.ID] = m
	}
	require.Equal(t, "true", byID[a.ID()].Labels["gpu"])
	require.Equal(t, 2, byID["other"].Load)
	require.Equal(t, os.Getpid(), byID["other"].PID)
	c.Leave()
	ms, err = a.Members(ctx)
	require.NoError(t, err)
	require.Len(t, ms, 1)

	// A member of this host whose process is gone is not live, though its
	// entry has not expired.
	dead, err := session.Join(ctx, b, session.Member{ID: "dead", PID: deadPID(t)}, nil, time.Minute, 1)
	require.NoError(t, err)
	defer dead.Leave()
	ms, err = a.Members(ctx)
	require.NoError(t, err)
	require.Len(t, ms, 1)
}

// deadPID is the pid of a process that ran and exited.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	return cmd.Process.Pid
}

// Create records a pipeline without running it: the store lists it as
// running with no owner, nothing has fired, and a Resume (the member
// placement chose) runs it from its start, its input included.
func TestCreateThenResume(t *testing.T) {
	r := newRun(t)
	g := r.load(`digraph P { start [shape=Mdiamond]; work [shape=parallelogram, tool_command="echo worked"]; exit [shape=Msquare]; start -> work -> exit }`)
	cfg := r.config(g)
	cfg.ID, cfg.Durable, cfg.LogsDir, cfg.Input = "placed1", true, "", "hello"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, session.Create(ctx, cfg))
	running, err := session.Running(ctx, r.broker)
	require.NoError(t, err)
	require.Len(t, running, 1)
	require.Equal(t, "placed1", running[0].ID)
	o, err := session.ReadOwner(ctx, r.broker, "placed1", time.Now())
	require.NoError(t, err)
	require.Nil(t, o, "nobody runs it")
	require.Empty(t, r.visits(), "nothing fired")
	for _, ev := range r.events {
		require.NotEqual(t, "session.stopped", ev.GetKind())
	}

	s, err := session.Resume(ctx, cfg)
	require.NoError(t, err)
	defer s.Stop()
	rep, err := s.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "success", rep.Status, rep.Reason)
	require.Contains(t, rep.Node("work").Output, "worked")
	require.Equal(t, 1, rep.Node("start").Visits, "the input, recorded by Create, fired the start node")
	require.Equal(t, 1, rep.Node("work").Visits)

	cfg.Durable = false
	require.Error(t, session.Create(ctx, cfg), "a session that is not durable cannot run elsewhere")
}
