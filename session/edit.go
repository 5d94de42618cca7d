package session

import (
	"errors"
	"fmt"

	"github.com/switchyard/switchyard/actors"
	"github.com/switchyard/switchyard/graph"
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
	return ed, diags, nil
}

// Version is the running graph's version (1, then one more per edit).
func (s *Session) Version() uint64 { return s.sys.Version() }
