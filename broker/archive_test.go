package broker_test

import (
	"bytes"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/internal/brokertest"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// streamNames lists the store's streams.
func streamNames(t *testing.T, js jetstream.JetStream) []string {
	t.Helper()
	var names []string
	l := js.StreamNames(ctx(t))
	for n := range l.Name() {
		names = append(names, n)
	}
	require.NoError(t, l.Err())
	return names
}

// TestArchiveSession: a completed session's entries and objects move into
// the archive, its own bucket and object store are gone (two streams fewer
// for the server to recover at every start), and everything it held reads
// the same from there — its entries through OpenRecord, its artifacts by
// the references its envelopes carry. Archived twice, nothing changes; a
// restored session has its bucket back, its objects still readable; and
// DeleteSession leaves nothing of it in the archive.
func TestArchiveSession(t *testing.T) {
	b := brokertest.Start(t)
	js := b.JetStream()
	kv, err := broker.SessionKV(ctx(t), js, "s1", broker.FileStorage, broker.Fresh())
	require.NoError(t, err)
	entries := map[string][]byte{
		"session.meta":            []byte(`{"id":"s1"}`),
		"graph.dot":               []byte("digraph g {}"),
		"journal.000000000001":    []byte("one"),
		"journal.000000000002":    bytes.Repeat([]byte("r"), 200<<10),
		"journal.000000000003":    bytes.Repeat([]byte("s"), 300<<10), // packed, more than one part
		"journal.000000000004":    bytes.Repeat([]byte("t"), 300<<10),
		"checkpoint.latest":       []byte(`{"seq":2}`),
		"session.stopped":         []byte(`{}`),
		"deleted.before.archived": []byte("x"),
	}
	// In the order a session writes them (the journal's entries in the
	// order of their numbers).
	for _, k := range []string{"session.meta", "graph.dot", "journal.000000000001", "deleted.before.archived",
		"journal.000000000002", "journal.000000000003", "journal.000000000004", "checkpoint.latest", "session.stopped"} {
		_, err := kv.Put(ctx(t), k, entries[k])
		require.NoError(t, err)
	}
	_, err = kv.Put(ctx(t), "checkpoint.latest", []byte(`{"seq":3}`))
	require.NoError(t, err)
	entries["checkpoint.latest"] = []byte(`{"seq":3}`)
	require.NoError(t, kv.Delete(ctx(t), "deleted.before.archived"))
	delete(entries, "deleted.before.archived")

	small, err := broker.PutArtifact(ctx(t), js, "s1", "a/1/small.txt", "file", []byte("small"), broker.FileStorage)
	require.NoError(t, err)
	bigData := bytes.Repeat([]byte("0123456789"), 30<<10) // three chunks
	big, err := broker.PutArtifact(ctx(t), js, "s1", "a/1/big.bin", "file", bigData, broker.FileStorage)
	require.NoError(t, err)
	empty, err := broker.PutArtifact(ctx(t), js, "s1", "a/1/empty", "file", nil, broker.FileStorage)
	require.NoError(t, err)
	// Another session's bucket is left alone.
	other, err := broker.SessionKV(ctx(t), js, "s2", broker.FileStorage, broker.Fresh())
	require.NoError(t, err)
	_, err = other.Put(ctx(t), "session.meta", []byte(`{"id":"s2"}`))
	require.NoError(t, err)

	archived, err := broker.Archived(ctx(t), js, "s1")
	require.NoError(t, err)
	require.False(t, archived)
	rec, err := broker.OpenRecord(ctx(t), js, "s1")
	require.NoError(t, err)
	require.False(t, rec.Archived, "read from its bucket while it has one")
	first, err := rec.First(ctx(t), js, "journal.")
	require.NoError(t, err)
	require.Equal(t, "journal.000000000001", first)

	require.NoError(t, broker.ArchiveSession(ctx(t), js, "s1", broker.FileStorage, summary))
	names := streamNames(t, js)
	require.NotContains(t, names, "KV_"+broker.KVName("s1"), "its bucket is gone")
	require.NotContains(t, names, "OBJ_"+broker.ObjectsName("s1"), "its object store is gone")
	require.Contains(t, names, "KV_"+broker.KVName("s2"))
	require.ElementsMatch(t, []string{"s1"}, mustArchived(t, js))

	check := func(what string) {
		t.Helper()
		rec, err := broker.OpenRecord(ctx(t), js, "s1")
		require.NoError(t, err, what)
		require.True(t, rec.Archived, what)
		for k, v := range entries {
			e, err := rec.Get(ctx(t), k)
			require.NoError(t, err, "%s: %s", what, k)
			require.Equal(t, v, e.Value(), "%s: %s", what, k)
		}
		_, err = rec.Get(ctx(t), "deleted.before.archived")
		require.ErrorIs(t, err, jetstream.ErrKeyNotFound, what)
		// The oldest journal entry, in the order they were written.
		first, err := rec.First(ctx(t), js, "journal.")
		require.NoError(t, err, what)
		require.Equal(t, "journal.000000000001", first, what)
		first, err = rec.First(ctx(t), js, "nosuch.")
		require.NoError(t, err, what)
		require.Empty(t, first, what)
		for _, a := range []struct {
			art  *pb.Artifact
			data []byte
		}{{small, []byte("small")}, {big, bigData}, {empty, nil}} {
			got, err := broker.GetArtifact(ctx(t), js, a.art)
			require.NoError(t, err, "%s: %s", what, a.art.Ref)
			require.Equal(t, len(a.data), len(got), "%s: %s", what, a.art.Ref)
			require.Equal(t, a.data, append([]byte(nil), got...)[:len(a.data)], what)
		}
		_, err = broker.GetArtifact(ctx(t), js, &pb.Artifact{Ref: small.Ref, Sha256: big.Sha256})
		require.ErrorIs(t, err, broker.ErrArtifactMismatch, "%s: the sha256 is still checked", what)
	}
	check("archived")
	require.NoError(t, broker.ArchiveSession(ctx(t), js, "s1", broker.FileStorage, summary), "archiving again")
	check("archived again")

	_, err = broker.OpenRecord(ctx(t), js, "nosuch")
	require.ErrorIs(t, err, jetstream.ErrBucketNotFound)

	// Restored (a resume), its bucket has its entries back; its objects
	// stay in the archive and read from there.
	require.NoError(t, broker.RestoreSession(ctx(t), js, "s1", broker.FileStorage))
	require.Empty(t, mustArchived(t, js))
	rec, err = broker.OpenRecord(ctx(t), js, "s1")
	require.NoError(t, err)
	require.False(t, rec.Archived)
	for k, v := range entries {
		e, err := rec.Get(ctx(t), k)
		require.NoError(t, err, k)
		require.Equal(t, v, e.Value(), k)
	}
	got, err := broker.GetArtifact(ctx(t), js, small)
	require.NoError(t, err)
	require.Equal(t, "small", string(got))
	// It stores another artifact and completes again: both kinds read.
	later, err := broker.PutArtifact(ctx(t), js, "s1", "b/2/later.txt", "file", []byte("later"), broker.FileStorage)
	require.NoError(t, err)
	require.NoError(t, broker.ArchiveSession(ctx(t), js, "s1", broker.FileStorage, summary))
	check("archived after a restore")
	got, err = broker.GetArtifact(ctx(t), js, later)
	require.NoError(t, err)
	require.Equal(t, "later", string(got))

	// Deleted, nothing of it is left in the archive.
	require.NoError(t, broker.DeleteSession(ctx(t), js, "s1"))
	require.Empty(t, mustArchived(t, js))
	_, err = broker.OpenRecord(ctx(t), js, "s1")
	require.ErrorIs(t, err, jetstream.ErrBucketNotFound)
	for _, stream := range []string{"KV_" + broker.ArchiveName, "OBJ_" + broker.ArchiveName} {
		st, err := js.Stream(ctx(t), stream)
		require.NoError(t, err)
		info, err := st.Info(ctx(t))
		require.NoError(t, err)
		require.Zero(t, info.State.Msgs, "%s holds nothing of a deleted session", stream)
	}
	_, err = broker.GetArtifact(ctx(t), js, small)
	require.Error(t, err)
	_, err = broker.OpenRecord(ctx(t), js, "s2")
	require.NoError(t, err, "the other session is untouched")
}

func mustArchived(t *testing.T, js jetstream.JetStream) []string {
	t.Helper()
	list, err := broker.ArchivedSessions(ctx(t), js)
	require.NoError(t, err)
	var ids []string
	for _, a := range list {
		require.Equal(t, "meta "+`{"id":"`+a.ID+`"}`, string(a.Summary), "the mark holds the summary of the entries")
		ids = append(ids, a.ID)
	}
	return ids
}

// summary is what the test's archiving writes in the mark.
func summary(entries map[string][]byte) []byte {
	return []byte("meta " + string(entries["session.meta"]))
}

// TestBrokerArchived: Broker.Archived answers as the package's Archived
// does, through the archive's stream as it last found it: a store with no
// archive says no; a session archived since (the archive made then) is
// seen, and so is the next one archived; the archive deleted (an
// operator's doing), it says no again, and sees the archive made anew.
func TestBrokerArchived(t *testing.T) {
	b := brokertest.Start(t)
	js := b.JetStream()
	archive := func(id string) {
		t.Helper()
		kv, err := broker.SessionKV(ctx(t), js, id, broker.FileStorage, broker.Fresh())
		require.NoError(t, err)
		_, err = kv.Put(ctx(t), "session.meta", []byte(`{"id":"`+id+`"}`))
		require.NoError(t, err)
		require.NoError(t, broker.ArchiveSession(ctx(t), js, id, broker.FileStorage, nil))
	}
	archived := func(id string) bool {
		t.Helper()
		got, err := b.Archived(ctx(t), id)
		require.NoError(t, err)
		want, err := broker.Archived(ctx(t), js, id)
		require.NoError(t, err)
		require.Equal(t, want, got, "the broker and the package disagree on %s", id)
		return got
	}
	require.False(t, archived("a1"), "no archive")
	archive("a1")
	require.True(t, archived("a1"))
	require.False(t, archived("a2"))
	archive("a2")
	require.True(t, archived("a2"), "archived after the archive's stream was found")
	require.NoError(t, js.DeleteStream(ctx(t), "KV_"+broker.ArchiveName))
	require.False(t, archived("a1"), "the archive deleted")
	archive("a3")
	require.True(t, archived("a3"), "the archive made anew")
	require.False(t, archived("a1"))
}
