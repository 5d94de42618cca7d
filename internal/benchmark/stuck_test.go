package benchmark

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/graph"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

// TestStuckStateSaysWhereADurableIngestStands checks what an ingest that
// timed out reports: the session's held deliveries, the sink's gate, and
// what the session's consumer delivered and left in the stream.
func TestStuckStateSaysWhereADurableIngestStands(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	env, err := NewEnv(ctx)
	require.NoError(t, err)
	defer env.Close()
	src, _ := ingestGraph(Latest)
	g, diags := graph.Load("ingest.dot", []byte(src), graph.WithKnownTypes(append(graph.BuiltinTypes, sinkType)...))
	require.False(t, diags.HasErrors(), "%v", diags)
	var progress atomic.Int64
	reg, err := sinkRegistry(Latest, &progress)
	require.NoError(t, err)
	s, err := session.Start(ctx, session.Config{Graph: g, Broker: env.Broker, Registry: reg, Durable: true,
		Checkpoint: &session.CheckpointPolicy{}})
	require.NoError(t, err)
	defer s.Stop()
	mk := func(i int) (string, *pb.Envelope) {
		return broker.Edge(s.ID(), "src.sink"), outsideEnvelope(s.ID(), s.ID()+".ext"+strconv.Itoa(i), "src", "src.sink", i)
	}
	require.NoError(t, publishJS(ctx, env, 3, mk, &progress))
	require.NoError(t, waitCount(ctx, 3, &progress))
	require.NoError(t, waitAcked(ctx, s.System()))

	got := stuckState(env, s)
	require.Contains(t, got, "the session holds 0 deliveries unacknowledged; sink: sink is idle")
	// The acknowledgements are sent, the server may not have them yet:
	// the floor and the unacknowledged count are not asserted.
	require.Regexp(t, `consumer: delivered stream seq 3, ack floor \d+, 0 pending in the stream, \d+ unacknowledged, \d+ waiting pulls; goroutines: `, got)
	_, file, ok := strings.Cut(got, "; goroutines: ")
	require.True(t, ok)
	defer os.Remove(file)
	stacks, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Contains(t, string(stacks), "goroutine profile:")
	require.Contains(t, string(stacks), "github.com/switchyard/switchyard/") // the session's own goroutines are there
}
