package actors

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/nodes"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// Artifacts. In a durable session a node's outputs that are files live in
// the session's object store: the files it declares (node attribute
// artifacts, globs relative to the work dir) and, for agent nodes with an
// outgoing edge, the response. The envelopes it sends carry references (a file name, the
// object's reference, sha256). A node that receives envelopes with
// artifacts gets a copy of each under {stage}/inputs/<object name> before
// its handler runs, checked against its sha256. Only objects of the
// session's own store are read, and only into the stage directory
// (checkArtifact).

// objectsOn reports whether this session keeps artifacts.
func (s *System) objectsOn() bool { return s.cfg.Consume && s.cfg.JetStream != nil }

// storeArtifacts stores what a firing produced and returns the references.
// It runs on the handler's goroutine.
func (a *nodeActor) storeArtifacts(ctx context.Context, j *job, o *nodes.Outcome) ([]*pb.Artifact, error) {
	if !a.s.objectsOn() {
		return nil, nil
	}
	prefix := j.node.ID + "/" + strconv.FormatUint(j.firing, 10) + "/"
	var out []*pb.Artifact
	told := false
	storing := func() {
		if !told && a.s.cfg.Storing != nil {
			a.s.cfg.Storing(j.node.ID, j.firing)
		}
		told = true
	}
	// The response is stored for the nodes it is sent to: a node with no
	// outgoing edge sends it nowhere, and storing it would grow the store
	// by an object per firing for nothing (the journal and the events
	// keep the response text).
	if typ := j.in.Type; (typ == graph.TypeCodergen || (typ == graph.TypeConditional && j.node.Prompt() != "")) && o.Response != "" &&
		len(j.in.Graph.OutEdges(j.node.ID)) > 0 {
		storing()
		art, err := broker.PutArtifact(ctx, a.s.cfg.JetStream, a.s.cfg.SessionID, prefix+"response.md", "response",
			[]byte(o.Response), a.s.cfg.Storage)
		if err != nil {
			return nil, err
		}
		out = append(out, art)
	}
	globs := j.node.Attrs.String("artifacts")
	if strings.TrimSpace(globs) == "" {
		return out, nil
	}
	dir := j.in.WorkDir
	if dir == "" {
		dir = "."
	}
	var files []string
	for _, g := range strings.Split(globs, ",") {
		g = strings.TrimSpace(g)
		if g == "" {
			continue
		}
		matches, err := filepath.Glob(filepath.Join(dir, g))
		if err != nil {
			return nil, fmt.Errorf("artifacts %q: %w", g, err)
		}
		files = append(files, matches...)
	}
	sort.Strings(files)
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil || st.IsDir() {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		rel, err := filepath.Rel(dir, f)
		if err != nil || !filepath.IsLocal(rel) {
			return nil, fmt.Errorf("artifacts: %s is outside the working directory %s", f, dir)
		}
		storing()
		art, err := broker.PutArtifact(ctx, a.s.cfg.JetStream, a.s.cfg.SessionID, prefix+filepath.ToSlash(rel), "file",
			data, a.s.cfg.Storage)
		if err != nil {
			return nil, err
		}
		out = append(out, art)
	}
	return out, nil
}

// fetchArtifacts copies the artifacts of a firing's messages into
// {stage}/inputs/, checking each one's sha256. It runs on the handler's
// goroutine.
func (a *nodeActor) fetchArtifacts(ctx context.Context, j *job) error {
	for i, env := range j.batch {
		for _, art := range env.GetPayload().GetArtifacts() {
			// Checked on arrival already (checkIngress); checked again here,
			// where the file is written, whatever way the envelope came.
			obj, err := checkArtifact(a.s.cfg.SessionID, art)
			if err != nil {
				return fmt.Errorf("artifact %q: %w", art.GetName(), err)
			}
			m := nodes.Artifact{Name: artifactName(art, obj), Type: art.GetType(), Ref: art.GetRef(), SHA256: art.GetSha256(), Size: art.GetSize()}
			if a.s.objectsOn() && j.in.StageDir != "" {
				data, err := broker.GetArtifact(ctx, a.s.cfg.JetStream, art)
				if err != nil {
					return err
				}
				if art.GetSize() > 0 && int64(len(data)) != art.GetSize() {
					return fmt.Errorf("artifact %s: %d bytes, the envelope says %d", art.GetRef(), len(data), art.GetSize())
				}
				p := inputPath(j.in.StageDir, obj)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					return err
				}
				if err := os.WriteFile(p, data, 0o644); err != nil {
					return err
				}
				m.Path = p
			}
			j.in.Messages[i].Artifacts = append(j.in.Messages[i].Artifacts, m)
		}
	}
	return nil
}

// inputPath is where a node's copy of the object obj (checked by
// checkArtifact) goes: under {stage}/inputs/.
func inputPath(stage, obj string) string {
	return filepath.Join(stage, "inputs", filepath.FromSlash(obj))
}
