package actors

import (
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/edges"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/nodes"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/scheduler"
)

// Edit is what a live edit changed.
type Edit struct {
	Version                 uint64
	Added, Removed, Changed []string
	EdgesAdded, EdgesGone   []string
}

// reconfigure gives a kept node its new definition; it applies from the
// node's next firing.
type reconfigure struct {
	g    *graph.Graph
	node *graph.Node
	typ  string
	h    nodes.Handler
	pure bool
	held []scheduler.Input // what the node's old gate held, to offer again
}

// retire removes a node: it finishes its current work and stops. held is
// what its gate held when the scheduler forgot it (a join's arrivals, a
// manual gate's), dropped on record with what its buffers hold.
type retire struct {
	held []scheduler.Input
}

// ApplyEdit replaces the running graph by g (already validated): added
// nodes start, removed nodes finish their current work and stop, changed
// nodes apply their new attributes from their next firing, and edges that
// still exist keep what is buffered on them. It refuses, changing nothing,
// a graph whose nodes have no handler or whose scheduling is invalid.
func (s *System) ApplyEdit(g *graph.Graph) (*Edit, error) {
	if s.stoppedNow() {
		return nil, ErrStopped
	}
	if g.Kind() != s.graph().Kind() {
		return nil, errors.New("actors: a live edit cannot change the graph's kind")
	}
	g = withReverseEdges(g)
	scfg, err := scheduler.ConfigFrom(g)
	if err != nil {
		return nil, err
	}
	type resolved struct {
		typ  string
		h    nodes.Handler
		pure bool
	}
	handlers := map[string]resolved{}
	for _, n := range g.Nodes {
		typ, h, pure, err := s.resolve(g, n)
		if err != nil {
			return nil, err
		}
		handlers[n.ID] = resolved{typ, h, pure}
	}
	// Every check that needs nothing changed comes first: an edge whose
	// delivery cannot be buffered fails the edit before anything moved.
	for _, e := range g.Edges {
		if _, _, err := edges.Delivery(e); err != nil {
			return nil, fmt.Errorf("actors: live edit: edge %s -> %s: %w", e.From, e.To, err)
		}
	}
	old := s.graph()
	ed := &Edit{}
	for _, n := range g.Nodes {
		if o := old.Node(n.ID); o == nil {
			ed.Added = append(ed.Added, n.ID)
		} else if !sameAttrs(o.Attrs, n.Attrs) || strings.Join(incomingIDs(old, n.ID), ",") != strings.Join(incomingIDs(g, n.ID), ",") {
			ed.Changed = append(ed.Changed, n.ID)
		}
	}
	for _, n := range old.Nodes {
		if g.Node(n.ID) == nil {
			ed.Removed = append(ed.Removed, n.ID)
		}
	}
	oldEdges, newEdges := edgeSet(old), edgeSet(g)
	added := make(map[string]bool, len(ed.Added))
	for _, id := range ed.Added {
		added[id] = true
	}
	for id := range newEdges {
		if oldEdges[id] == nil {
			ed.EdgesAdded = append(ed.EdgesAdded, id)
		}
	}
	for id := range oldEdges {
		if newEdges[id] == nil {
			ed.EdgesGone = append(ed.EdgesGone, id)
		}
	}
	sort.Strings(ed.EdgesAdded)
	sort.Strings(ed.EdgesGone)

	// Added nodes and edges listen before anything routes to them: a core
	// NATS message published before its subscription exists is lost. What
	// can fail is done before the scheduler changes, and undone when it
	// does fail: a failed edit leaves the session as it was.
	var undo []func()
	rollback := func(err error) (*Edit, error) {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
		s.Emit(&pb.Event{Kind: "session.edit_failed", Message: err.Error()})
		return nil, err
	}
	// A durable session's stream stores the new subjects before anything
	// routes to them, and the old ones until nothing routes to them.
	topo, oldSubjects := newTopology(s.cfg.SessionID, g), s.topo.Load().subjects
	both := maps.Clone(oldSubjects)
	maps.Copy(both, topo.subjects)
	if s.cfg.JetStream != nil && len(both) > len(oldSubjects) {
		if err := s.narrowStream(both); err != nil {
			return rollback(fmt.Errorf("actors: live edit: %w", err))
		}
		undo = append(undo, func() {
			if err := s.narrowStream(oldSubjects); err != nil {
				s.log.Error("actors: live edit: rollback", "err", err)
			}
		})
	}
	for _, id := range ed.Added {
		// A node an earlier edit removed while it ran keeps its actor
		// until that work is done: it cannot be added back before.
		if s.pidOf(id) != nil {
			return rollback(fmt.Errorf("actors: live edit: node %s is still finishing its removal by an earlier edit; apply this edit after its node.removed event", id))
		}
		err := s.spawn(g, g.Node(id))
		if s.pidOf(id) != nil {
			undo = append(undo, func() { s.unspawn(g, id) })
		}
		if err != nil {
			return rollback(fmt.Errorf("actors: live edit: %w", err))
		}
	}
	for _, id := range ed.EdgesAdded {
		e := newEdges[id]
		if e == nil || added[e.To] {
			continue // a new node subscribed to its own edges
		}
		subj := broker.Edge(s.cfg.SessionID, id)
		s.mu.Lock()
		pid, _ := s.pidLocked(e.To)
		s.mu.Unlock()
		s.setRoute(subj, e.To, pid)
		undo = append(undo, func() { s.dropRoute(subj) })
	}
	if err := s.cfg.Conn.Flush(); err != nil {
		return rollback(err)
	}
	held, err := s.sched.Reconfigure(scfg)
	if err != nil {
		return rollback(err)
	}
	// Kept nodes take their new definition (buffers of new edges among it)
	// before the first envelope routed by the new graph reaches them.
	for _, n := range g.Nodes {
		if added[n.ID] {
			continue
		}
		r := handlers[n.ID]
		s.wake(n.ID, &reconfigure{g: g, node: n, typ: r.typ, h: r.h, pure: r.pure, held: held[n.ID]})
	}
	s.editMu.Lock()
	s.topo.Store(topo)
	s.editMu.Unlock()
	// From here no node routes on a removed edge; what was already sent on
	// one reaches its actor before the actor learns of the edit, and is
	// delivered or reported there.
	if !s.cfg.Consume && len(ed.EdgesGone)+len(ed.Removed) > 0 {
		s.settleDispatch()
	}
	for _, id := range ed.EdgesGone {
		s.dropRoute(broker.Edge(s.cfg.SessionID, id))
	}
	s.dropRoutesOf(ed.Removed)
	for _, id := range ed.Removed {
		s.wake(id, &retire{held: held[id]})
	}
	if s.cfg.JetStream != nil && len(both) > len(topo.subjects) {
		// Nothing routes on the removed subjects any more. Should the
		// stream keep them, what arrives there is still refused (an
		// event and a dead letter), only acknowledged first.
		if err := s.narrowStream(topo.subjects); err != nil {
			s.log.Error("actors: live edit: the work stream keeps removed subjects", "err", err)
			s.Emit(&pb.Event{Kind: "session.warning", Message: "live edit: the work stream still stores the removed inboxes and edges: " + err.Error()})
		}
	}
	ed.Version = s.version.Add(1)
	s.Emit(&pb.Event{Kind: "session.edited", Message: fmt.Sprintf("version %d: %d added, %d removed, %d changed",
		ed.Version, len(ed.Added), len(ed.Removed), len(ed.Changed)),
		Attrs: []*pb.KV{{Key: "version", Value: fmt.Sprint(ed.Version)}, {Key: "added", Value: strings.Join(ed.Added, ",")},
			{Key: "removed", Value: strings.Join(ed.Removed, ",")}, {Key: "changed", Value: strings.Join(ed.Changed, ",")}}})
	return ed, nil
}

// reconfigured applies a reconfigure message on the actor's goroutine.
func (a *nodeActor) reconfigured(m *reconfigure) {
	a.node, a.typ, a.h, a.inline, a.pure = m.node, m.typ, m.h, inlined(m.h, m.node), m.pure
	if err := a.setEdges(m.g); err != nil {
		a.s.log.Error("actors: live edit", "node", a.node.ID, "err", err)
	}
	for _, in := range m.held {
		a.offer(in.Edge, in.Item.(*pb.Envelope))
	}
}

// retired stops the node once it is idle; what it still holds is reported.
func (a *nodeActor) retired(c actor.Context, m *retire) {
	a.retiring = true
	if m != nil {
		for _, in := range m.held {
			a.removedHeld = append(a.removedHeld, in.Item.(*pb.Envelope))
		}
	}
	if a.running {
		return // the current work completes first
	}
	if !a.emptied {
		a.emptied = true
		for _, eb := range a.bufs {
			a.discard(eb.b.Pending(), "node "+a.node.ID+" was removed by a live edit")
			eb.b.Close()
		}
		for _, batch := range a.queue {
			a.discard(batch, "node "+a.node.ID+" was removed by a live edit")
		}
		a.queue = nil
		a.dropHead()
		a.discard(a.removedHeld, "node "+a.node.ID+" was removed by a live edit")
		a.removedHeld = nil
	}
	if a.inflight > 0 {
		return // the records on their way are acknowledged first (committed)
	}
	a.s.mu.Lock()
	if a.s.actors[a.node.ID] == a { // not a node added again under its id meanwhile
		delete(a.s.actors, a.node.ID)
	}
	a.s.retired = append(a.s.retired, a) // its goroutines end at Stop
	a.s.mu.Unlock()
	a.s.Emit(&pb.Event{Kind: "node.removed", Node: a.node.ID})
	c.Stop(c.Self())
}

func sameAttrs(a, b graph.Attrs) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w.Text != v.Text {
			return false
		}
	}
	return true
}

func incomingIDs(g *graph.Graph, node string) []string {
	var out []string
	for _, e := range g.Incoming(node) {
		out = append(out, edges.EdgeID(e))
	}
	sort.Strings(out)
	return out
}

// edgeSet is the edges of g by id (edges.EdgeID).
func edgeSet(g *graph.Graph) map[string]*graph.Edge {
	out := make(map[string]*graph.Edge, len(g.Edges))
	for _, e := range g.Edges {
		out[edges.EdgeID(e)] = e
	}
	return out
}

// dropRoutesOf removes every route to the nodes a live edit removed, in one
// pass over the routes (one pass per node made removing thousands of
// nodes quadratic).
func (s *System) dropRoutesOf(nodes []string) {
	if len(nodes) == 0 {
		return
	}
	gone := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		gone[n] = true
	}
	s.routeMu.Lock()
	for subj, r := range s.routes {
		if gone[r.node] {
			delete(s.routes, subj)
		}
	}
	s.routeMu.Unlock()
}

// unspawn undoes spawn(g, node) for a node a failed live edit added: its
// subscriptions or consumer end and its actor stops.
func (s *System) unspawn(g *graph.Graph, node string) {
	s.mu.Lock()
	pid, _ := s.pidLocked(node)
	delete(s.actors, node)
	s.mu.Unlock()
	s.dropRoutesTo(node)
	if pid != nil {
		_, _ = s.as.await(func() *actor.Future { return s.root.StopFuture(pid) })
	}
}
