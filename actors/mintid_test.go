package actors

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/nodes"
)

// TestMintIDBeforeTheSystem: an id signed with a session's key before
// its System exists (a durable pipeline's input, sent with its creation
// before the actors are made) is the id the System signs for the same
// base, so a resume that replays the input knows it; another key signs
// another id.
func TestMintIDBeforeTheSystem(t *testing.T) {
	b := brokertest.Start(t, brokertest.Memory())
	g, err := graph.Parse("t.dot", []byte(`digraph t { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }`))
	require.NoError(t, err)
	reg := nodes.NewRegistry()
	require.NoError(t, nodes.RegisterBuiltins(reg, nodes.Deps{}))
	key := NewIDKey()
	s, err := New(Config{SessionID: "mint", Graph: g, Conn: b.Conn(), Registry: reg, IDKey: key,
		Journal: JournalFunc(func(context.Context, *Commit) error { return nil })})
	require.NoError(t, err)
	defer s.Stop()
	require.Equal(t, s.MintID("mint.input"), MintID(key, "mint.input"))
	require.NotEqual(t, s.MintID("mint.input"), MintID(NewIDKey(), "mint.input"))
	require.NotEqual(t, MintID(key, "mint.input"), MintID(key, "mint.other"))
}
