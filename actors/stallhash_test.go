package actors

import (
	"hash/fnv"
	"sort"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/switchyard/switchyard/nodes"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// TestStallHashesAreFNV: the input and output hashes of stall detection
// are FNV-1a over the same bytes as hash/fnv's New64a was fed: a
// journal's stall windows (scheduler snapshots) compare equal across
// versions.
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
		{{Kind: KindHandoff, FromNode: "a", Payload: &pb.Payload{Message: "m"}, Outcome: &pb.Outcome{Status: "success"}}},
		{{Kind: KindTick}, {Kind: KindHandoff, FromNode: "b", Payload: &pb.Payload{Message: "m2", Structured: st}}},
		{{Kind: KindTick}},
	}
	for i, batch := range batches {
		h := fnv.New64a()
		tick := true
		for _, e := range batch {
			if e.GetKind() != KindTick || e.GetFromNode() != "" {
				tick = false
			}
			for _, s := range []string{e.GetKind(), e.GetFromNode(), e.GetPayload().GetMessage(), e.GetOutcome().GetStatus()} {
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
