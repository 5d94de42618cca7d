package actors

import (
	"hash/fnv"
	"sort"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/nodes"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// TestStallHashesAreFNV: the input and output hashes of stall detection
// are FNV-1a over the same bytes as hash/fnv's New64a was fed: a
// journal's stall windows (scheduler snapshots) compare equal across
// versions (the input's root joined them in the nineteenth round).
func TestStallHashesAreFNV(t *testing.T) {
	for _, o := range []*nodes.Outcome{
		{},
		{Response: "hello"},
		{Response: "x", ContextUpdates: map[string]string{"b": "2", "a": "1", "c": ""}},
		{ContextUpdates: map[string]string{"k1": "v", "k2": "v", "k3": "v", "k4": "v", "k5": "v", "k6": "v", "k7": "v", "k8": "v", "k9": "v", "k10": "v"}},
	} {
		h := fnv.New64a()
		h.Write([]byte(o.Response))
		keys := make([]string, 0, len(o.ContextUpdates))
		for k := range o.ContextUpdates {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			h.Write([]byte{0})
			h.Write([]byte(k))
			h.Write([]byte{0})
			h.Write([]byte(o.ContextUpdates[k]))
		}
		require.Equal(t, strconv.FormatUint(h.Sum64(), 16), outputHash(o))
	}

	st, err := structpb.NewStruct(map[string]any{"n": 1, "s": "x"})
	require.NoError(t, err)
	batches := [][]*pb.Envelope{
		{{Id: "s.a.1.b~x", Root: "ev1", Kind: KindHandoff, FromNode: "a", Payload: &pb.Payload{Message: "m"}, Outcome: &pb.Outcome{Status: "success"}}},
		{{Id: "s.b.tick.1", Kind: KindTick}, {Id: "ev2", Kind: KindHandoff, FromNode: "b", Payload: &pb.Payload{Message: "m2", Structured: st}}},
		{{Id: "s.b.tick.2", Kind: KindTick}},
	}
	for i, batch := range batches {
		h := fnv.New64a()
		tick := true
		for _, e := range batch {
			if e.GetKind() != KindTick || e.GetFromNode() != "" {
				tick = false
			}
			for _, s := range []string{rootOf(e), e.GetKind(), e.GetFromNode(), e.GetPayload().GetMessage(), e.GetOutcome().GetStatus()} {
				h.Write([]byte(s))
				h.Write([]byte{0})
			}
			if st := e.GetPayload().GetStructured(); st != nil {
				b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(st)
				h.Write(b)
			}
			h.Write([]byte{1})
		}
		got, gotTick := inputHash(batch)
		require.Equal(t, strconv.FormatUint(h.Sum64(), 16), got, "batch %d", i)
		require.Equal(t, tick, gotTick, "batch %d", i)
	}
}

// TestStallInputsOfTwoRoots: the same text from outside twice is two
// inputs (each envelope is its own root), and so is what each causes
// downstream (the outputs carry their input's root); a loop's envelopes,
// which keep their root, are the same input when their text is.
func TestStallInputsOfTwoRoots(t *testing.T) {
	event := func(id string) *pb.Envelope {
		return &pb.Envelope{Id: id, Kind: KindHandoff, FromNode: "src", Payload: &pb.Payload{Message: "same alert"}}
	}
	hash := func(e *pb.Envelope) string { h, _ := inputHash([]*pb.Envelope{e}); return h }
	require.NotEqual(t, hash(event("ev1")), hash(event("ev2")), "two events with the same text")

	caused := func(id, root string) *pb.Envelope {
		return &pb.Envelope{Id: id, Root: root, Kind: KindHandoff, FromNode: "triage", Payload: &pb.Payload{Message: "ack"},
			Outcome: &pb.Outcome{Status: "success"}, ContextVersion: 1}
	}
	require.NotEqual(t, hash(caused("s.triage.1.x~a", "ev1")), hash(caused("s.triage.2.x~b", "ev2")),
		"what two events cause downstream")
	require.Equal(t, hash(caused("s.triage.1.x~a", "ev1")), hash(caused("s.triage.5.x~c", "ev1")),
		"a loop's envelopes, one root, the same text: the same input")

	sys := &System{cfg: Config{SessionID: "s"}, ids: newIDSigner(NewIDKey()), clk: clock.Real()}
	out := (&nodeActor{s: sys, node: &graph.Node{ID: "triage"}}).
		envelope(&job{batch: []*pb.Envelope{event("ev1")}, firing: 1}, "sink", "triage.sink", &nodes.Outcome{Status: nodes.StatusSuccess}, nil, "", 1, nil)
	require.Equal(t, "ev1", out.GetRoot(), "an output carries its input's root")
	again := (&nodeActor{s: sys, node: &graph.Node{ID: "sink"}}).
		envelope(&job{batch: []*pb.Envelope{out}, firing: 1}, "x", "sink.x", &nodes.Outcome{Status: nodes.StatusSuccess}, nil, "", 2, nil)
	require.Equal(t, "ev1", again.GetRoot(), "and passes it on")

	forged := &pb.Envelope{Id: "ev3", Root: "ev1", Kind: KindHandoff, Payload: &pb.Payload{Message: "x"}}
	stripEngineState(forged)
	require.Empty(t, forged.GetRoot(), "an outside envelope cannot name a root")
}
