package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/switchyard/switchyard/actors"
	"github.com/switchyard/switchyard/graph"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// ErrInvalidEdit is returned (wrapped, with the diagnostics) when an edited
// graph does not validate; the running graph is then unchanged.
var ErrInvalidEdit = errors.New("session: the edited graph is invalid")

// Edit applies a live edit from DOT source: it is validated first (an
// invalid file changes nothing and the error says why), then the running
// graph is changed in place (see actors.System.ApplyEdit) and a
// session.edited event records the new version.
func (s *Session) Edit(filename string, src []byte) (*actors.Edit, graph.Diagnostics, error) {
	opts := []graph.LoadOption{graph.WithKnownTypes(s.registry.Types()...)}
	if s.cfg.Graph.Kind() == "session" {
		opts = append(opts, graph.AsSession())
	}
	g, diags := graph.Load(filename, src, opts...)
	if g == nil || diags.HasErrors() {
		return nil, diags, fmt.Errorf("%w:\n%s", ErrInvalidEdit, diags.Errors())
	}
	ed, err := s.sys.ApplyEdit(g)
	if err != nil {
		return nil, diags, err
	}
	s.recordEdit(g)
	return ed, diags, nil
}

// recordEdit stores a durable session's edited graph in its bucket, as its
// graph: the process that resumes it next (after a restart, a takeover, a
// move to another member) runs the graph as edited, not as it started.
// The write is fenced like the journal's. Should it fail, the edit still
// applies here, and a session.warning says a resume would run the previous
// graph.
func (s *Session) recordEdit(g *graph.Graph) {
	if !s.cfg.Durable || s.jr == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.jr.recordGraph(ctx, g); err != nil {
		s.sys.Emit(&pb.Event{Kind: "session.warning",
			Message: "the edited graph is not recorded in the store (a resume runs the previous one): " + err.Error()})
	}
}

// Version is the running graph's version (1, then one more per edit).
func (s *Session) Version() uint64 { return s.sys.Version() }
