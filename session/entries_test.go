package session

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// A batch's records come back from its entries as they went in, in order,
// split at maxEntryRecords, each entry's records the first's batch.
func TestEntriesRoundTrip(t *testing.T) {
	var batch []pendingRecord
	var want []*pb.JournalRecord
	for i := range 150 {
		rec := &pb.JournalRecord{Seq: uint64(i + 1), Node: "n" + strconv.Itoa(i%3), Firing: uint64(i), Status: "success",
			Consumed: []string{"e" + strconv.Itoa(i)}, ConsumedSeqs: []uint64{uint64(i + 7)},
			Context: []*pb.KV{{Key: "k", Value: strconv.Itoa(i)}}}
		if i%5 == 0 {
			rec.Produced = []*pb.Envelope{{Id: "out" + strconv.Itoa(i), Payload: &pb.Payload{Message: "m"}}}
		}
		want = append(want, proto.CloneOf(rec))
		batch = append(batch, pendingRecord{seq: rec.Seq, node: rec.Node, rec: rec})
	}
	es, err := entries(batch)
	require.NoError(t, err)
	require.Len(t, es, 3, "150 records, at most %d an entry", maxEntryRecords)
	var got []*pb.JournalRecord
	for _, e := range es {
		var rec pb.JournalRecord
		require.NoError(t, proto.Unmarshal(e.data, &rec))
		require.Equal(t, e.first, rec.GetSeq())
		recs := records(&rec)
		require.Equal(t, e.last, recs[len(recs)-1].GetSeq())
		got = append(got, recs...)
	}
	require.Len(t, got, len(want))
	for i := range want {
		g := proto.CloneOf(got[i])
		g.Batch = nil
		require.True(t, proto.Equal(want[i], g), "record %d: %v != %v", i+1, want[i], g)
	}
}

// A record is stored with the strings it is given, as the journal reads
// them back (readRecord): a handler's output that is not UTF-8 (a tool's
// binary output) is kept, not a failed checkpoint.
func TestEntriesKeepStringsAsGiven(t *testing.T) {
	rec := &pb.JournalRecord{Seq: 1, Node: "tool", Firing: 1, Status: "success",
		Context:  []*pb.KV{{Key: "tool.output", Value: "\xff\xfe binary"}},
		Produced: []*pb.Envelope{{Id: "out", Payload: &pb.Payload{Message: "\xc3\x28"}}}}
	want := proto.CloneOf(rec)
	es, err := entries([]pendingRecord{{seq: 1, node: "tool", rec: rec}})
	require.NoError(t, err)
	require.Len(t, es, 1)
	var got pb.JournalRecord
	require.NoError(t, got.UnmarshalVT(es[0].data))
	require.Equal(t, "\xff\xfe binary", got.GetContext()[0].GetValue())
	require.Equal(t, "\xc3\x28", got.GetProduced()[0].GetPayload().GetMessage())
	require.True(t, proto.Equal(want, &got), "%v != %v", want, &got)
}
