package session_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/session"
)

func sessions(n int, labels map[string]string) []session.Wanted {
	var ws []session.Wanted
	for i := range n {
		ws = append(ws, session.Wanted{ID: fmt.Sprintf("s%d", i), Labels: labels})
	}
	return ws
}

func TestRebalanceMovesTheShareOfNewMembers(t *testing.T) {
	a := session.Member{ID: "a", All: true}
	gpu := map[string]string{"gpu": "true"}
	for _, tc := range []struct {
		name   string
		held   []session.Wanted
		others []session.Member
		want   []string
	}{
		{"alone", sessions(6, nil), nil, nil},
		{"two join: 2-2-2", sessions(6, nil), []session.Member{{ID: "b", All: true}, {ID: "c", All: true}},
			[]string{"s5", "s4", "s3", "s2"}},
		{"one session more than the others: stays", sessions(3, nil), []session.Member{{ID: "b", All: true, Load: 2}}, nil},
		{"two more: one moves", sessions(4, nil), []session.Member{{ID: "b", All: true, Load: 2}}, []string{"s3"}},
		{"7 over 3: 3-2-2", sessions(7, nil), []session.Member{{ID: "b", All: true}, {ID: "c", All: true}},
			[]string{"s6", "s5", "s4", "s3"}},
		{"two loaded members, two join: each gives its own share",
			sessions(6, nil), []session.Member{{ID: "b", All: true, Load: 6}, {ID: "c", All: true}, {ID: "d", All: true}},
			[]string{"s5", "s4", "s3"}},
		{"a member without the labels takes none", sessions(4, gpu), []session.Member{{ID: "b", All: true}}, nil},
		{"a member of other files takes none", sessions(4, nil), []session.Member{{ID: "b", Files: []string{"/x.dot"}}}, nil},
		{"a session whose placement it no longer matches moves, whatever the loads",
			append(sessions(1, nil), session.Wanted{ID: "z", Labels: gpu}),
			[]session.Member{{ID: "b", All: true, Labels: gpu, Load: 5}}, []string{"z"}},
		{"and stays when no member matches", append(sessions(1, nil), session.Wanted{ID: "z", Labels: gpu}),
			[]session.Member{{ID: "b", All: true, Load: 1}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			members := append([]session.Member{a}, tc.others...)
			require.Equal(t, tc.want, session.Rebalance(tc.held, a, members))
		})
	}
}

// The plan of the sessions a member hands over, computed by the members
// that take them (Place), spreads them evenly.
func TestRebalanceThenPlace(t *testing.T) {
	held := sessions(6, nil)
	members := []session.Member{{ID: "a", All: true}, {ID: "b", All: true}, {ID: "c", All: true}}
	moved := session.Rebalance(held, members[0], members)
	members[0].Load = len(held) - len(moved)
	var free []session.Wanted
	for _, id := range moved {
		free = append(free, session.Wanted{ID: id})
	}
	per := map[string]int{"a": members[0].Load}
	for _, to := range session.Place(free, members) {
		per[to]++
	}
	require.Equal(t, map[string]int{"a": 2, "b": 2, "c": 2}, per)
}

// A member moves sessions only once the members stayed the same for the
// settle period, and not twice within one.
func TestRebalancerSettles(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	r := session.NewRebalancer(10*time.Second, clk)
	one := []session.Member{{ID: "a"}}
	two := []session.Member{{ID: "a"}, {ID: "b"}}
	require.False(t, r.Due(one), "first sight")
	clk.Advance(10 * time.Second)
	require.True(t, r.Due(one))
	require.False(t, r.Due(two), "a member joined")
	clk.Advance(9 * time.Second)
	require.False(t, r.Due(two), "not settled")
	clk.Advance(time.Second)
	require.True(t, r.Due(two))
	// Loads change, the view does not.
	two[1].Load = 3
	require.True(t, r.Due(two))
	// New labels are a change.
	two[1].Labels = map[string]string{"gpu": "true"}
	require.False(t, r.Due(two))
	clk.Advance(10 * time.Second)
	require.True(t, r.Due(two))

	r.Moved([]string{"s1"})
	require.True(t, r.Gave("s1"))
	require.False(t, r.Gave("s2"))
	clk.Advance(5 * time.Second)
	require.False(t, r.Due(two), "moved 5 s ago")
	require.True(t, r.Gave("s1"))
	clk.Advance(5 * time.Second)
	require.True(t, r.Due(two))
	require.False(t, r.Gave("s1"), "taken back through the plan after a settle period")
}
