package actors

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// capturing is an actor of a new actor system that passes on every
// message of type M it gets (up to n waiting), both stopped when t ends.
func capturing[M any](t *testing.T, n int) (*actor.ActorSystem, *actor.PID, <-chan M) {
	as := actor.NewActorSystem()
	t.Cleanup(as.Shutdown)
	got := make(chan M, n)
	pid := as.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(M); ok {
			got <- m
		}
	}))
	t.Cleanup(func() { as.Root.Stop(pid) })
	return as, pid, got
}

// handRig is a System of session s whose node b, reading the edge a -> b,
// is an actor that passes on every delivery it gets.
func handRig(t *testing.T) (*System, <-chan *delivery) {
	as, pid, got := capturing[*delivery](t, 1)
	return &System{cfg: Config{SessionID: "s"}, root: as.Root, storedPrefix: "sy.s.w.",
		routes: map[string]route{"sy.s.edge.a.b": {node: "b", pid: pid}}}, got
}

// TestHandOverFollowsTheStream: an output is handed to its node in process
// only once the consumer has handed on every envelope the runtime stored
// in the work stream (a resume's pending ones): until then it goes through
// the stream behind them (false), so an edge keeps its order.
func TestHandOverFollowsTheStream(t *testing.T) {
	s, got := handRig(t)
	env := &pb.Envelope{Id: "s.a.1.a.b", Kind: KindHandoff}

	raise(&s.stored, 7) // a resume stored a pending envelope at 7
	raise(&s.fed, 6)
	if s.handOver("sy.s.edge.a.b", "a.b", env) {
		t.Fatal("handed over before the consumer handed on sequence 7")
	}
	raise(&s.fed, 7)
	if !s.handOver("sy.s.edge.a.b", "a.b", env) {
		t.Fatal("not handed over once the consumer caught up")
	}
	select {
	case d := <-got:
		if !d.handed || d.edge != "a.b" || d.env != env {
			t.Fatalf("delivery %+v: want %s handed on edge a.b", d, env.Id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the node got nothing")
	}
	if s.handOver("sy.s.edge.x.y", "x.y", env) {
		t.Fatal("handed over on a subject no node reads")
	}
}

// TestHandLocalFollowsTheBus: in a session that is not durable, an output
// is handed to its node in process only once every envelope the session
// published on the bus for its own nodes (Send: Execution.Publish, a
// steer) reached their nodes: until then it goes over the
// bus behind them (false), so an edge keeps its order.
func TestHandLocalFollowsTheBus(t *testing.T) {
	s, got := handRig(t)
	env := &pb.Envelope{Id: "s.a.1.a.b", Kind: KindHandoff}

	s.busOut.Add(2) // two envelopes published for the session's nodes
	s.busIn.Add(1)  // one of them arrived
	if s.handLocal("sy.s.edge.a.b", "a.b", env) {
		t.Fatal("handed over while an envelope was on its way")
	}
	s.busIn.Add(1)
	if !s.handLocal("sy.s.edge.a.b", "a.b", env) {
		t.Fatal("not handed over once the bus delivered everything")
	}
	select {
	case d := <-got:
		if d.handed || d.ack != "" || d.edge != "a.b" || d.env != env {
			t.Fatalf("delivery %+v: want %s on edge a.b, nothing to acknowledge", d, env.Id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the node got nothing")
	}
	if s.handLocal("sy.s.edge.x.y", "x.y", env) {
		t.Fatal("handed over on a subject no node reads")
	}
}
