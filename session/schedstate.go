package session

import (
	"context"
	"time"

	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/scheduler"
)

// A journal record carries the part of the scheduler's counters its firing
// changed as a protobuf SchedulerState: a few dozen bytes for a firing that
// only counts itself, where the same counters as JSON (which records of
// earlier versions hold, and snapshots still do) were about as large as
// the event the firing consumed and took a reflection walk to write.

// countRecord is a SchedulerState of counters (countState), in one
// allocation.
type countRecord struct {
	st     pb.SchedulerState
	count  pb.SchedulerCount
	counts [1]*pb.SchedulerCount
	stall  pb.SchedulerList
	stalls [1]*pb.SchedulerList
}

// countState is c, node's part of the scheduler's state (CountOf), as the
// SchedulerState schedState makes of the same part as a Snapshot
// (SnapshotOf).
func countState(node string, c scheduler.Count) *pb.SchedulerState {
	return new(countRecord).fill(node, c)
}

// fill makes r countState's state of c (r zero, or reset).
func (r *countRecord) fill(node string, c scheduler.Count) *pb.SchedulerState {
	r.st.Partial, r.st.Total = true, int64(c.Total)
	r.count.Key, r.count.N = node, int64(c.N)
	r.counts[0] = &r.count
	r.st.Iterations = r.counts[:]
	if c.Watched {
		r.stall.Key, r.stall.Values = node, c.Stalls
		r.stalls[0] = &r.stall
		r.st.Stalls = r.stalls[:]
	}
	return &r.st
}

// reset makes r zero again (a record block reused).
func (r *countRecord) reset() {
	r.st.Reset()
	r.count.Reset()
	r.stall.Reset()
	r.counts[0], r.stalls[0] = nil, nil
}

// schedState is snap as a SchedulerState.
func schedState(snap *scheduler.Snapshot) *pb.SchedulerState {
	st := &pb.SchedulerState{Partial: snap.Partial, Total: int64(snap.Total)}
	if len(snap.Iterations) > 0 {
		st.Iterations = make([]*pb.SchedulerCount, 0, len(snap.Iterations))
		for k, v := range snap.Iterations {
			st.Iterations = append(st.Iterations, &pb.SchedulerCount{Key: k, N: int64(v)})
		}
	}
	for k, v := range snap.Spent {
		st.Spent = append(st.Spent, &pb.SchedulerSpent{Scope: k, TimeNs: int64(v.Time), Tokens: v.Tokens, Cost: v.Cost})
	}
	st.Announced = lists(snap.Announced)
	st.Stalls = lists(snap.Stalls)
	st.Held = lists(snap.Held)
	for k, v := range snap.Stopped {
		st.Stopped = append(st.Stopped, &pb.KV{Key: k, Value: v})
	}
	for k, v := range snap.Causes {
		st.Causes = append(st.Causes, &pb.KV{Key: k, Value: v})
	}
	for k, j := range snap.Joins {
		pj := &pb.SchedulerJoin{Node: k, Queued: lists(j.Queued)}
		for e, state := range j.Edges {
			pj.Edges = append(pj.Edges, &pb.KV{Key: e, Value: state})
		}
		st.Joins = append(st.Joins, pj)
	}
	for k, ts := range snap.Windows {
		pt := &pb.SchedulerTimes{Key: k}
		if len(ts) > 0 {
			pt.UnixNanos = make([]int64, len(ts))
			for i, t := range ts {
				pt.UnixNanos[i] = t.UnixNano()
			}
		}
		st.Windows = append(st.Windows, pt)
	}
	if len(snap.Ticks) > 0 {
		st.Ticks = make([]*pb.SchedulerTick, 0, len(snap.Ticks))
		for k, t := range snap.Ticks {
			st.Ticks = append(st.Ticks, &pb.SchedulerTick{Node: k, UnixNanos: t.UnixNano()})
		}
	}
	return st
}

func lists(m map[string][]string) []*pb.SchedulerList {
	if len(m) == 0 {
		return nil
	}
	out := make([]*pb.SchedulerList, 0, len(m))
	for k, v := range m {
		out = append(out, &pb.SchedulerList{Key: k, Values: v})
	}
	return out
}

// snapshotOf is the scheduler.Snapshot a SchedulerState holds: a key
// listed with no values is kept, with an empty list (Merge removes it).
func snapshotOf(st *pb.SchedulerState) *scheduler.Snapshot {
	snap := &scheduler.Snapshot{Partial: st.GetPartial(), Total: int(st.GetTotal()),
		Iterations: map[string]int{}, Spent: map[string]scheduler.Spent{}}
	for _, c := range st.GetIterations() {
		snap.Iterations[c.GetKey()] = int(c.GetN())
	}
	for _, s := range st.GetSpent() {
		snap.Spent[s.GetScope()] = scheduler.Spent{Time: time.Duration(s.GetTimeNs()), Tokens: s.GetTokens(), Cost: s.GetCost()}
	}
	snap.Announced = listMap(st.GetAnnounced())
	snap.Stalls = listMap(st.GetStalls())
	snap.Held = listMap(st.GetHeld())
	snap.Stopped = kvMap(st.GetStopped())
	snap.Causes = kvMap(st.GetCauses())
	if js := st.GetJoins(); len(js) > 0 {
		snap.Joins = make(map[string]scheduler.Join, len(js))
		for _, j := range js {
			snap.Joins[j.GetNode()] = scheduler.Join{Edges: kvMap(j.GetEdges()), Queued: listMap(j.GetQueued())}
		}
	}
	if ws := st.GetWindows(); len(ws) > 0 {
		snap.Windows = make(map[string][]time.Time, len(ws))
		for _, w := range ws {
			var ts []time.Time
			for _, n := range w.GetUnixNanos() {
				ts = append(ts, time.Unix(0, n))
			}
			snap.Windows[w.GetKey()] = ts
		}
	}
	if ts := st.GetTicks(); len(ts) > 0 {
		snap.Ticks = make(map[string]time.Time, len(ts))
		for _, t := range ts {
			snap.Ticks[t.GetNode()] = time.Unix(0, t.GetUnixNanos())
		}
	}
	return snap
}

func listMap(ls []*pb.SchedulerList) map[string][]string {
	if len(ls) == 0 {
		return nil
	}
	m := make(map[string][]string, len(ls))
	for _, l := range ls {
		m[l.GetKey()] = l.GetValues()
	}
	return m
}

func kvMap(kvs []*pb.KV) map[string]string {
	if len(kvs) == 0 {
		return nil
	}
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = kv.GetValue()
	}
	return m
}

// cronSince gives each schedule node the checkpoint records no last tick
// for (nothing was committed since its schedule started, or an earlier
// version wrote the journal) the time after which none of its ticks can
// have been committed: the last record's time, or when the session
// started if it has none. A tick is committed at or after its scheduled
// time, so a resume fires the time missed after that (scheduler.Start's
// catch-up) and never one already fired. Without it such a node would
// start from now, and the first tick of a session whose owner died
// before anything was committed would be lost.
func cronSince(ctx context.Context, cfg *Config, cp *Checkpoint) {
	var missing []string
	for _, n := range cfg.Graph.Nodes {
		if n.Attrs.String("trigger") != scheduler.TriggerSchedule {
			continue
		}
		if cp.Scheduler != nil {
			if _, ok := cp.Scheduler.Ticks[n.ID]; ok {
				continue
			}
		}
		missing = append(missing, n.ID)
	}
	if len(missing) == 0 {
		return
	}
	var since time.Time
	if cp.Seq > 0 {
		since = cp.Timestamp
	} else if m, err := ReadMeta(ctx, cfg.Broker, cfg.ID); err == nil {
		since = m.Started
	}
	if since.IsZero() {
		return // unknown: the schedule starts from now
	}
	if cp.Scheduler == nil {
		cp.Scheduler = &scheduler.Snapshot{}
	}
	if cp.Scheduler.Ticks == nil {
		cp.Scheduler.Ticks = map[string]time.Time{}
	}
	for _, id := range missing {
		cp.Scheduler.Ticks[id] = since
	}
}
