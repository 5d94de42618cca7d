package actors

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/nodes"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// TestStoppedSystemLeavesItsActorSystemClean: a stopped System's actor
// system, kept for the next one, holds nothing of it in its registry —
// release keeps it on its own bookkeeping (the actors it spawned, the
// futures it waits on) without counting the registry.
func TestStoppedSystemLeavesItsActorSystemClean(t *testing.T) {
	b := brokertest.Start(t, brokertest.Memory())
	g, err := graph.Parse("t.dot", []byte(`digraph t {
		start [shape=Mdiamond]; exit [shape=Msquare]
		a [type="work"]; b [type="work"]
		start -> a -> b -> exit
	}`))
	require.NoError(t, err)
	reg := nodes.NewRegistry()
	require.NoError(t, nodes.RegisterBuiltins(reg, nodes.Deps{}))
	running := make(chan struct{}, 1)
	block := true
	require.NoError(t, reg.Register(nodes.Info{Type: "work", Handler: nodes.HandlerFunc(
		func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
			if in.Node.ID == "b" && block {
				running <- struct{}{}
				<-ctx.Done() // Stop
				return nil, ctx.Err()
			}
			return &nodes.Outcome{Status: nodes.StatusSuccess}, nil
		})}))
	for round := 0; round < 2; round++ {
		ended := make(chan *Terminal, 1)
		s, err := New(Config{SessionID: "clean", Graph: g, Conn: b.Conn(), Registry: reg,
			Journal:    JournalFunc(func(context.Context, *Commit) error { return nil }),
			OnTerminal: func(_ string, t *Terminal) { ended <- t }})
		require.NoError(t, err)
		as := s.as
		env := &pb.Envelope{Id: s.MintID("clean.input"), SessionId: "clean", Kind: KindHandoff, ToNode: "start", ContextVersion: 1}
		require.NoError(t, s.Send(context.Background(), broker.NodeIn("clean", "start"), env))
		if round == 0 {
			// The System stops with b's firing running, after a request to
			// an actor (a future in the registry until answered).
			select {
			case <-running:
			case <-time.After(10 * time.Second):
				t.Fatal("b did not fire")
			}
			s.buffered("a")
			block = false
		} else {
			select {
			case <-ended:
			case <-time.After(10 * time.Second):
				t.Fatal("the run did not end")
			}
		}
		s.Stop()
		require.Equal(t, as.base, registered(as.as), "round %d: the registry holds more than the actor system's own processes", round)
	}
}
