package broker_test

import (
	"bytes"
	"io"
	"path"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/internal/brokertest"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// TestArtifacts stores artifacts of several sizes (empty, one chunk,
// several) and reads them back through the standard object store API and
// by reference, sha256 checked.
func TestArtifacts(t *testing.T) {
	b := brokertest.Start(t)
	js := b.JetStream()
	for _, size := range []int{0, 10, 128 << 10, 300 << 10} {
		data := bytes.Repeat([]byte{'a', 'b', 'c'}, size/3+1)[:size]
		name := "n/1/file-" + string(rune('a'+size%26))
		a, err := broker.PutArtifact(ctx(t), js, "s1", name, "file", data, broker.FileStorage)
		require.NoError(t, err)
		require.Equal(t, int64(size), a.Size)
		require.Equal(t, "obj://sy_obj_s1/"+name, a.Ref)
		require.Equal(t, path.Base(name), a.Name, "an artifact's name is a file name")

		got, err := broker.GetArtifact(ctx(t), js, a)
		require.NoError(t, err)
		require.Equal(t, data, got)

		obj, err := js.ObjectStore(ctx(t), broker.ObjectsName("s1"))
		require.NoError(t, err)
		r, err := obj.Get(ctx(t), name)
		require.NoError(t, err)
		std, err := io.ReadAll(r)
		require.NoError(t, err, "the standard reader checks the digest")
		require.NoError(t, r.Close())
		require.Equal(t, data, std)
	}
	_, err := broker.GetArtifact(ctx(t), js, &pb.Artifact{Ref: "file:///tmp/x"})
	require.ErrorContains(t, err, "not in an object store")
}

// TestDeleteArtifact: a deleted artifact leaves nothing in the store — no
// chunk, no description, no delete marker — and the others stay readable.
func TestDeleteArtifact(t *testing.T) {
	b := brokertest.Start(t)
	js := b.JetStream()
	big := bytes.Repeat([]byte("x"), 300<<10) // three chunks
	gone, err := broker.PutArtifact(ctx(t), js, "s1", "n/1/big", "file", big, broker.MemoryStorage)
	require.NoError(t, err)
	kept, err := broker.PutArtifact(ctx(t), js, "s1", "n/2/small", "file", []byte("small"), broker.MemoryStorage)
	require.NoError(t, err)
	require.NoError(t, broker.DeleteArtifact(ctx(t), js, "s1", "n/1/big"))
	require.NoError(t, broker.DeleteArtifact(ctx(t), js, "s1", "n/1/big"), "deleting again is no error")
	_, err = broker.GetArtifact(ctx(t), js, gone)
	require.Error(t, err)
	data, err := broker.GetArtifact(ctx(t), js, kept)
	require.NoError(t, err)
	require.Equal(t, "small", string(data))
	st, err := js.Stream(ctx(t), "OBJ_"+broker.ObjectsName("s1"))
	require.NoError(t, err)
	require.Equal(t, uint64(2), st.CachedInfo().State.Msgs, "the small object's chunk and description only")
}

// TestArtifactNames lists the objects of a session's store by name.
func TestArtifactNames(t *testing.T) {
	b := brokertest.Start(t)
	js := b.JetStream()
	names, err := broker.ArtifactNames(ctx(t), js, "s2")
	require.NoError(t, err)
	require.Empty(t, names, "no store yet")
	for _, n := range []string{"b/2/response.md", "a/1/out/x.json", "inbox/e1/notes.txt"} {
		_, err := broker.PutArtifact(ctx(t), js, "s2", n, "file", []byte(n), broker.MemoryStorage)
		require.NoError(t, err)
	}
	require.NoError(t, broker.DeleteArtifact(ctx(t), js, "s2", "b/2/response.md"))
	names, err = broker.ArtifactNames(ctx(t), js, "s2")
	require.NoError(t, err)
	require.Equal(t, []string{"a/1/out/x.json", "inbox/e1/notes.txt"}, names)
}
