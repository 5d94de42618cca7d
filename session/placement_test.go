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
