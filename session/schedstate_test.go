package session

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/graph"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/scheduler"
)

// TestSchedStateRoundTrip: the scheduler's counters come back from a
// journal record's SchedulerState as they went in — keys listed with no
// values included, which remove their key when merged.
func TestSchedStateRoundTrip(t *testing.T) {
	at := time.Unix(0, 1_700_000_000_123_456_789)
	for name, snap := range map[string]*scheduler.Snapshot{
		"a firing that only counts itself": {Partial: true, Total: 7, Iterations: map[string]int{"sink": 7},
			Spent: map[string]scheduler.Spent{}, Windows: map[string][]time.Time{"": nil, "sink": nil}},
		"everything": {Partial: true, Total: 12, Iterations: map[string]int{"a": 3, "b": 9},
			Spent:     map[string]scheduler.Spent{"": {Time: 3 * time.Second, Tokens: 120, Cost: 0.25}, "cluster_x": {Tokens: 5}},
			Announced: map[string][]string{"": {"tokens:80"}, "cluster_x": nil},
			Stopped:   map[string]string{"b": "max visits"}, Causes: map[string]string{"b": "max_iterations"},
			Stalls: map[string][]string{"a": {"r1", "r2"}, "b": nil},
			Joins: map[string]scheduler.Join{"j": {Edges: map[string]string{"a.j": "delivered", "b.j": "waiting"},
				Queued: map[string][]string{"a.j": {"e1", "e2"}}}},
			Held:    map[string][]string{"gate": {"e9"}},
			Windows: map[string][]time.Time{"": {at, at.Add(time.Second)}, "a": nil},
			Ticks:   map[string]time.Time{"digest": at, "hourly": at.Add(time.Hour)}},
		"whole": {Total: 1, Iterations: map[string]int{"a": 1}, Spent: map[string]scheduler.Spent{}},
	} {
		t.Run(name, func(t *testing.T) {
			data, err := proto.Marshal(schedState(snap))
			require.NoError(t, err)
			st := &pb.SchedulerState{}
			require.NoError(t, proto.Unmarshal(data, st))
			require.Equal(t, snap, snapshotOf(st))
			js, err := json.Marshal(snap)
			require.NoError(t, err)
			t.Logf("%d bytes (JSON: %d)", len(data), len(js))
		})
	}
}

// TestJSONSchedulerRecordApplied: a journal record an earlier version
// wrote, with the scheduler's counters as JSON, is still applied.
func TestJSONSchedulerRecordApplied(t *testing.T) {
	j := newJournal("", "s", "g", nil)
	j.offline = true
	data, err := json.Marshal(&scheduler.Snapshot{Partial: true, Total: 4, Iterations: map[string]int{"a": 4}})
	require.NoError(t, err)
	require.NoError(t, j.applyRecord(&pb.JournalRecord{Seq: 1, Scheduler: data}))
	require.NoError(t, j.applyRecord(&pb.JournalRecord{Seq: 2,
		Sched: schedState(&scheduler.Snapshot{Partial: true, Total: 5, Iterations: map[string]int{"b": 1}})}))
	require.Equal(t, 5, j.sched.Total)
	require.Equal(t, map[string]int{"a": 4, "b": 1}, j.sched.Iterations)
}

// TestCountStateIsSchedState: the counters CountOf gives, as a record's
// SchedulerState (countState), are what SnapshotOf's part gives
// (schedState) — and CountOf gives up where SnapshotOf holds more.
func TestCountStateIsSchedState(t *testing.T) {
	g, diags := graph.Load("t.dot", []byte(`digraph g { a; b [stall_after=0]; c [max_iterations="5/1h"]; a -> b }`), graph.AsSession())
	require.False(t, diags.HasErrors(), "%v", diags)
	cfg, err := scheduler.ConfigFrom(g)
	require.NoError(t, err)
	s, err := scheduler.New(cfg, clock.NewFake(time.Unix(1_700_000_000, 0)), func(scheduler.Notice) {})
	require.NoError(t, err)
	s.Start()
	t.Cleanup(s.Close)
	fire := func(node, out string) {
		t.Helper()
		tk, w, _ := s.Admit(node)
		require.Nil(t, w)
		require.NotNil(t, tk)
		s.Release(tk, scheduler.Result{Status: "success", OutputHash: out})
	}
	same := func(node string) {
		t.Helper()
		c, ok := s.CountOf(node)
		require.True(t, ok, node)
		snap := s.SnapshotOf(node)
		require.True(t, proto.Equal(schedState(&snap), countState(node, c)), "%s: %v != %v", node, schedState(&snap), countState(node, c))
	}
	same("a") // not fired yet
	fire("a", "1")
	same("a")
	fire("a", "1") // the same output: a stall window with entries
	same("a")
	fire("b", "2")
	same("b")
	fire("c", "3")
	_, ok := s.CountOf("c")
	require.False(t, ok, "a windowed cap's firing window is not a counter")
	_, ok = s.CountOf("")
	require.False(t, ok)
	_, ok = s.CountOf("nosuch")
	require.False(t, ok)
}
