package session_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

// TestStoreBounded: a durable session's store does not grow with its
// firings — the journal keeps its last JournalKeep records and the work
// stream what is not consumed yet. Measured after 1,000 firings and after
// the whole run (100,000 with SWITCHYARD_FULL=1, 5,000 by default).
func TestStoreBounded(t *testing.T) {
	total := 5_000
	if os.Getenv("SWITCHYARD_FULL") == "1" {
		total = 100_000
	}
	if testing.Short() {
		total = 2_500
	}
	keep := session.JournalKeep
	if os.Getenv("SWITCHYARD_FULL") != "1" {
		session.JournalKeep = 256 // compaction shows within the default size
		t.Cleanup(func() { session.JournalKeep = keep })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	r := newRun(t, shortWindow)
	cfg := r.durable(clusterGraph, "bounded")
	fired := make(chan struct{}, total)
	cfg.Observer = func(ev *pb.Event) {
		if ev.Kind == "node.completed" && ev.Node == "work" {
			fired <- struct{}{}
		}
	}
	s, err := session.Start(ctx, cfg)
	require.NoError(t, err)
	defer s.Stop()
	js := r.broker.JetStream()

	sizes := func() (workMsgs, workBytes, kvMsgs, kvBytes uint64) {
		st, err := js.Stream(ctx, broker.StreamName("bounded"))
		require.NoError(t, err)
		kv, err := js.Stream(ctx, "KV_"+broker.KVName("bounded"))
		require.NoError(t, err)
		return st.CachedInfo().State.Msgs, st.CachedInfo().State.Bytes, kv.CachedInfo().State.Msgs, kv.CachedInfo().State.Bytes
	}
	var run func(from, to int)
	run = func(from, to int) {
		if to-from > 1000 { // at most 1,000 acknowledgements outstanding
			for i := from; i < to; i += 1000 {
				run(i, min(i+1000, to))
			}
			return
		}
		var acks []jetstream.PubAckFuture
		for i := from; i < to; i++ {
			id := "ev" + strconv.Itoa(i)
			f, err := js.PublishAsync("sy.bounded.edge.src.work", []byte(`{"kind":"handoff"}`), jetstream.WithMsgID(id))
			require.NoError(t, err)
			acks = append(acks, f)
		}
		for _, f := range acks {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				t.Fatalf("not acknowledged: %v", err)
			case <-ctx.Done():
				t.Fatal("not acknowledged")
			}
		}
		for i := from; i < to; i++ {
			select {
			case <-fired:
			case <-ctx.Done():
				t.Fatalf("%d firings of %d", i, to)
			}
		}
	}
	run(0, 1000)
	w1, wb1, k1, kb1 := sizes()
	t.Logf("after 1,000 firings: work stream %d messages %d bytes; journal bucket %d messages %d bytes", w1, wb1, k1, kb1)
	run(1000, total)
	// A trim keeps what came within the duplicate window (100 ms here)
	// before the newest envelope: one more at a time until one comes
	// after the window of the flood's last.
	st, err := js.Stream(ctx, broker.StreamName("bounded"))
	require.NoError(t, err)
	require.Equal(t, broker.MinDuplicateWindow, st.CachedInfo().Config.Duplicates, "the stream takes the store's window")
	for i := total; !purged(ctx, t, st, uint64(total)); i++ {
		run(i, i+1)
		require.NoError(t, session.TrimWork(s))
	}
	s.Stop() // the last records and snapshot written, nothing in flight
	w2, wb2, k2, kb2 := sizes()
	t.Logf("after %d firings: work stream %d messages %d bytes; journal bucket %d messages %d bytes (JournalKeep %d)",
		total, w2, wb2, k2, kb2, session.JournalKeep)
	// The work stream holds what was published since its last trim and
	// within the window before the newest envelope; the
	// bucket the kept records, a compaction interval, and a few keys.
	require.LessOrEqual(t, w2, uint64(1100), "work stream trimmed below the floor")
	require.LessOrEqual(t, k2, uint64(session.JournalKeep+1024+64+64), "journal compacted")
	// Nor do its records grow: the bucket's bytes stay within the records
	// it may keep at what a record cost after 1,000 firings (the first
	// 1,000 records, a snapshot and a few keys). Entries batch up to 64
	// records as the writer falls behind, so bytes per entry say nothing.
	kept := uint64(session.JournalKeep + 1024 + 64 + 64)
	require.LessOrEqual(t, kb2, 2*kb1/1000*kept, "nor do its records grow")
	require.LessOrEqual(t, wb2, 2*wb1, "the work stream's bytes stay at what is in flight")
}
