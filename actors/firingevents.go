package actors

import (
	"strconv"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// Every firing emits node.started and node.completed. Each is made with its
// time and its usual attributes in one allocation (an event, its timestamp,
// its attribute pairs and the slice of them were four to six allocations,
// about a sixth of what a reactive node's firing allocated): node.started
// with its two, node.completed with none (a failure's reason, a continue
// and the caller are the exception, made apart). The events are published
// and observed as any other (Emit); nothing holds them but their readers.

// eventBlock is an event with room for its time and two attributes.
type eventBlock struct {
	ev   pb.Event
	ts   timestamppb.Timestamp
	kv   [2]pb.KV
	ptrs [2]*pb.KV
	used int // pairs of kv in use
}

// add appends the attribute k=v, in the block while it has room.
func (b *eventBlock) add(k, v string) {
	if b.used == len(b.kv) {
		b.ev.Attrs = append(b.ev.Attrs, &pb.KV{Key: k, Value: v})
		return
	}
	kv := &b.kv[b.used]
	b.used++
	kv.Key, kv.Value = k, v
	b.ev.Attrs = append(b.ev.Attrs, kv)
}

// stamp sets the event's time to now (Emit then keeps it).
func (b *eventBlock) stamp(now time.Time) {
	b.ts.Seconds, b.ts.Nanos = now.Unix(), int32(now.Nanosecond())
	b.ev.Time = &b.ts
}

// startedEvent is a firing's node.started event.
func (a *nodeActor) startedEvent(firing uint64, caller []*pb.KV) *pb.Event {
	b := &eventBlock{}
	b.stamp(a.s.clk.Now())
	b.ev.Kind, b.ev.Node, b.ev.Attempts = "node.started", a.node.ID, 1
	b.ev.Attrs = b.ptrs[:0]
	b.add("firing", strconv.FormatUint(firing, 10))
	b.add("type", a.typ)
	b.ev.Attrs = append(b.ev.Attrs, callerAttrs(caller)...)
	return &b.ev
}

// completedBlock is a node.completed event with its time. Its attributes
// (a failure's reason, a continue, the caller) are the exception: they
// are made apart, and the block is 256 bytes (with room for two pairs,
// 448: most firings left it empty).
type completedBlock struct {
	ev pb.Event
	ts timestamppb.Timestamp
}

// add appends the attribute k=v.
func (b *completedBlock) add(k, v string) {
	b.ev.Attrs = append(b.ev.Attrs, &pb.KV{Key: k, Value: v})
}

// completedEvent is a firing's node.completed event, without attributes
// yet (add them with add).
func (a *nodeActor) completedEvent() *completedBlock {
	b := &completedBlock{}
	now := a.s.clk.Now()
	b.ts.Seconds, b.ts.Nanos = now.Unix(), int32(now.Nanosecond())
	b.ev.Time = &b.ts
	b.ev.Kind, b.ev.Node = "node.completed", a.node.ID
	return b
}
