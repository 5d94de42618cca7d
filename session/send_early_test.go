package session

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/actors"
	"github.com/switchyard/switchyard/internal/brokertest"
)

// A committer whose journal has no writer running sends its record itself
// before it starts the writer (startWriterLocked): the record is on its
// way when CommitAsync returns, whenever the writer goroutine gets to run.
// Here the writer goroutine cannot start (holdWriter), and the record is
// stored all the same; the committer is told once the writer has read its
// acknowledgement. (The test used to hold the journal's state lock from
// after CommitAsync returned: a writer that ran first, its round trip and
// all, told the committer before — once under CI's load.)
func TestCommitterSendsItsRecord(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := brokertest.Start(t)
	j, l := ownedJournal(ctx, t, b, "early")

	// The record's key, watched: the server stores a publish after it
	// read it (a flush of the connection says only that it read it).
	w, err := l.bucket.KV.Watch(ctx, l.bucket.Prefix+recordKey(1), jetstream.UpdatesOnly())
	require.NoError(t, err)
	defer func() { _ = w.Stop() }()
	told := make(chan error, 1)
	j.holdWriter = make(chan struct{}) // no writer starts until the record is checked
	j.CommitAsync(ctx, &actors.Commit{Node: "a", Firing: 1, Status: "success"}, func(err error) { told <- err })
	stored := time.After(10 * time.Second)
	for stored != nil {
		select {
		case e := <-w.Updates():
			if e != nil && e.Key() == l.bucket.Prefix+recordKey(1) {
				stored = nil
			}
		case <-stored:
			t.Fatal("the committer did not send its record")
		}
	}
	rec, err := readRecord(ctx, l.bucket, 1)
	require.NoError(t, err)
	require.Equal(t, "a", rec.GetNode())
	select {
	case err := <-told:
		t.Fatalf("told (%v) before the writer read the acknowledgement", err)
	default:
	}
	close(j.holdWriter)
	select {
	case err := <-told:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("the committer was never told")
	}
	require.NoError(t, j.flush())
}
