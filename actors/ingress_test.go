package actors

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

const fuzzSession = "sess"

// TestCheckArtifact: what an envelope's artifact may name and point at.
func TestCheckArtifact(t *testing.T) {
	own := "obj://sy_obj_sess/"
	sum := strings.Repeat("ab", 32)
	ok := []*pb.Artifact{
		{Name: "notes.md", Ref: own + "inbox/e1/notes.md", Sha256: sum, Size: 3},
		{Ref: own + "a/1/response.md"},
		{Name: "..notes", Ref: own + "x"},
		{Name: "a b.txt", Ref: own + "dir/a b.txt"},
	}
	for _, a := range ok {
		_, err := checkArtifact(fuzzSession, a)
		require.NoError(t, err, "%v", a)
	}
	bad := map[string]*pb.Artifact{
		"parent name":        {Name: "../../etc/passwd", Ref: own + "a/1/response.md"},
		"absolute name":      {Name: "/etc/passwd", Ref: own + "a/1/response.md"},
		"name with a slash":  {Name: "a/b", Ref: own + "a/1/response.md"},
		"backslash":          {Name: `a\b`, Ref: own + "a/1/response.md"},
		"dot dot":            {Name: "..", Ref: own + "a/1/response.md"},
		"dot":                {Name: ".", Ref: own + "a/1/response.md"},
		"NUL":                {Name: "a\x00b", Ref: own + "a/1/response.md"},
		"newline":            {Name: "a\nb", Ref: own + "a/1/response.md"},
		"long name":          {Name: strings.Repeat("a", 256), Ref: own + "x"},
		"other session":      {Name: "n", Ref: "obj://sy_obj_other/a/1/response.md"},
		"session prefix":     {Name: "n", Ref: "obj://sy_obj_sess2/a/1/response.md"},
		"escaping object":    {Name: "n", Ref: own + "../sy_obj_other/x"},
		"dot dot in object":  {Name: "n", Ref: own + "a/../../x"},
		"absolute object":    {Name: "n", Ref: own + "/etc/passwd"},
		"empty element":      {Name: "n", Ref: own + "a//b"},
		"trailing slash":     {Name: "n", Ref: own + "a/"},
		"bucket only":        {Name: "n", Ref: own},
		"backslash object":   {Name: "n", Ref: own + `a\..\..\x`},
		"file ref":           {Name: "n", Ref: "file:///etc/passwd"},
		"http ref":           {Name: "n", Ref: "https://example.com/x"},
		"bare path":          {Name: "n", Ref: "/etc/passwd"},
		"no ref":             {Name: "n"},
		"bad sha256":         {Name: "n", Ref: own + "x", Sha256: "zz"},
		"upper sha256":       {Name: "n", Ref: own + "x", Sha256: strings.ToUpper(sum)},
		"negative size":      {Name: "n", Ref: own + "x", Size: -1},
		"control in object":  {Name: "n", Ref: own + "a\x01b"},
		"invalid utf8 name":  {Name: "\xff", Ref: own + "x"},
		"very long object":   {Name: "n", Ref: own + strings.Repeat("a/", 600) + "x"},
		"dot object element": {Name: "n", Ref: own + "./x"},
	}
	for why, a := range bad {
		_, err := checkArtifact(fuzzSession, a)
		require.Error(t, err, why)
	}
	env := &pb.Envelope{Payload: &pb.Payload{}}
	for i := 0; i <= maxArtifacts; i++ {
		env.Payload.Artifacts = append(env.Payload.Artifacts, &pb.Artifact{Name: "n", Ref: own + "x"})
	}
	require.ErrorContains(t, checkEnvelope(fuzzSession, env), "artifacts (at most")
}

// FuzzIngress drives the envelope→handler input path with hostile
// artifacts (names, references, sizes, digests), in both wire forms: an
// envelope checkIngress accepts gives the handler a plain file name and a
// copy path inside {stage}/inputs/, read from this session's store only.
func FuzzIngress(f *testing.F) {
	f.Add("notes.md", "obj://sy_obj_sess/inbox/e1/notes.md", strings.Repeat("0", 64), int64(3), false)
	f.Add("../../../../etc/cron.d/x", "obj://sy_obj_sess/a/1/response.md", "", int64(0), true)
	f.Add("/etc/passwd", "obj://sy_obj_sess/a/1/response.md", "", int64(0), false)
	f.Add("n", "obj://sy_obj_other/a/1/response.md", "", int64(-5), true)
	f.Add("", "obj://sy_obj_sess/a/../../b", "", int64(1<<62), false)
	f.Add("", "obj://sy_obj_sess/a/b/c", "", int64(0), true)
	f.Add(`..\x`, "obj://sy_obj_sess/..", "", int64(0), false)
	f.Fuzz(func(t *testing.T, name, ref, sum string, size int64, asJSON bool) {
		env := &pb.Envelope{Id: "e", Payload: &pb.Payload{Message: "m",
			Artifacts: []*pb.Artifact{{Type: "file", Name: name, Ref: ref, Sha256: sum, Size: size}}}}
		var data []byte
		var err error
		if asJSON {
			data, err = json.Marshal(map[string]any{"id": "e", "payload": map[string]any{"artifacts": []map[string]any{
				{"type": "file", "name": name, "ref": ref, "sha256": sum, "size": size}}}})
		} else {
			data, err = proto.Marshal(env)
		}
		if err != nil {
			return
		}
		got, err := DecodeEnvelope(data)
		if err != nil {
			return // refused as malformed
		}
		if checkEnvelope(fuzzSession, got) != nil {
			return // refused
		}
		_ = toMessage(got) // what the handler is shown is built without fail
		stage := filepath.Join("/run", "logs", "node")
		for _, a := range got.GetPayload().GetArtifacts() {
			obj, err := checkArtifact(fuzzSession, a)
			require.NoError(t, err, "checkEnvelope accepted it")
			require.True(t, strings.HasPrefix(a.GetRef(), "obj://sy_obj_sess/"), "ref %q is outside the session's store", a.GetRef())
			n := artifactName(a, obj)
			require.NotContains(t, n, "/")
			require.NotContains(t, n, `\`)
			require.NotEqual(t, "..", n)
			require.NotEqual(t, ".", n)
			require.NotEmpty(t, n)
			p := inputPath(stage, obj)
			rel, err := filepath.Rel(filepath.Join(stage, "inputs"), p)
			require.NoError(t, err)
			require.True(t, filepath.IsLocal(rel), "%q (%q) is written outside the inputs: %s", a.GetRef(), obj, p)
			require.GreaterOrEqual(t, a.GetSize(), int64(0))
		}
	})
}

// TestSignedIDs: the runtime's ids are deterministic for a session's key
// and unpredictable without it; the proof that an envelope is the
// runtime's is another HMAC, not derivable from the id.
func TestSignedIDs(t *testing.T) {
	g, other := newIDSigner(NewIDKey()), newIDSigner(NewIDKey())
	id := g.sign("s.a.1.a.b")
	require.Regexp(t, `^s\.a\.1\.a\.b~[0-9a-f]{16}$`, id)
	require.Equal(t, id, g.sign("s.a.1.a.b"), "deterministic")
	require.NotEqual(t, id, other.sign("s.a.1.a.b"), "another session's key")
	require.NotEqual(t, g.sign("s.a.1.a.b"), g.sign("s.a.2.a.b"))

	s := &System{ids: g}
	p := g.proof(id)
	require.Len(t, p, idTagLen)
	require.NotContains(t, id, p)
	require.True(t, s.ownEnvelope(id, p))
	for _, forged := range []struct{ id, proof string }{
		{id, ""}, {id, strings.Repeat("0", idTagLen)}, {id, other.proof(id)}, {id, id[len(id)-idTagLen:]},
		{"", g.proof("")}, {"s.a.1.a.b", g.proof(id)}, {id, p + "0"},
	} {
		require.False(t, s.ownEnvelope(forged.id, forged.proof), "%+v", forged)
	}
}
