package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard/switchyard/actors"
	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/session"
)

// PlaceSubject is where `serve --place` tells the members of the
// deployment that it recorded sessions for them: they scan the store at
// once instead of at their next scan.
const PlaceSubject = "switchyard.place"

// strikesToTake is how many scans in a row a session may stay unowned while
// the plan gives it to another member before a member that may run it
// takes it (the other member's entry outlived it, or its plan differs).
const strikesToTake = 3

// placer decides, at each scan of a member, which of the sessions nobody
// runs it resumes (session/placement.go), and keeps the list of those no
// member may run.
type placer struct {
	ms      *session.Membership
	b       *broker.Broker
	h       *host
	stderr  io.Writer
	graphs  map[string]*graph.Graph // stored graphs of the sessions nobody runs, by session
	strikes map[string]int
	waiting map[string]string // session -> why it waits (said once)
	// rb moves running sessions to members that joined later (nil: never).
	rb *session.Rebalancer
}

func newPlacer(ms *session.Membership, b *broker.Broker, h *host, stderr io.Writer) *placer {
	return &placer{ms: ms, b: b, h: h, stderr: stderr, graphs: map[string]*graph.Graph{},
		strikes: map[string]int{}, waiting: map[string]string{}}
}

// graph is session id's stored graph, read once.
func (p *placer) graph(ctx context.Context, id string) (*graph.Graph, error) {
	if g, ok := p.graphs[id]; ok {
		return g, nil
	}
	g, _, err := storedGraph(ctx, p.b, id, io.Discard)
	if err != nil {
		return nil, err
	}
	p.graphs[id] = g
	return g, nil
}

// choose returns the sessions of cands (running, unowned, of this member's
// files) that this member resumes now.
func (p *placer) choose(ctx context.Context, cands []session.Meta) []session.Meta {
	wanted := make([]session.Wanted, 0, len(cands))
	byID := map[string]session.Meta{}
	bad := map[string]string{}
	for _, m := range cands {
		byID[m.ID] = m
		w := session.Wanted{ID: m.ID, File: m.File}
		g, err := p.graph(ctx, m.ID)
		if err == nil {
			w.Labels, err = session.PlacementOf(g)
		}
		if err != nil {
			bad[m.ID] = err.Error()
			continue
		}
		wanted = append(wanted, w)
	}
	members, err := p.ms.Members(ctx)
	if err != nil {
		fmt.Fprintf(p.stderr, "listing the deployment's members: %v\n", err)
		return nil
	}
	plan := session.Place(wanted, members)
	self := p.ms.Self()
	var mine []session.Meta
	waiting := map[string]string{}
	for id, why := range bad {
		waiting[id] = "not placed: " + why
	}
	for _, w := range wanted {
		to := plan[w.ID]
		switch {
		case to == "":
			if len(w.Labels) > 0 {
				waiting[w.ID] = "waiting for a member with labels " + session.FormatLabels(w.Labels)
			} else {
				waiting[w.ID] = "waiting for a member that serves its file"
			}
			delete(p.strikes, w.ID)
		case to == self.ID && (p.rb == nil || !p.rb.Gave(w.ID)):
			mine = append(mine, byID[w.ID])
			delete(p.strikes, w.ID)
		default: // another member's, or one this member just handed over
			p.strikes[w.ID]++
			if p.strikes[w.ID] >= strikesToTake && self.May(w) {
				mine = append(mine, byID[w.ID])
				delete(p.strikes, w.ID)
			}
		}
	}
	for id := range p.strikes {
		if _, ok := byID[id]; !ok {
			delete(p.strikes, id)
		}
	}
	for id := range p.graphs {
		if _, ok := byID[id]; !ok {
			delete(p.graphs, id) // read again when it waits again: a live edit may have changed it
		}
	}
	for id, why := range waiting {
		if p.waiting[id] != why {
			fmt.Fprintf(p.stderr, "session %s: %s\n", id, why)
		}
	}
	p.waiting = waiting
	infos := make([]SessionInfo, 0, len(waiting))
	for id, why := range waiting {
		m := byID[id]
		infos = append(infos, SessionInfo{ID: id, Graph: m.Graph, File: m.File, Status: "waiting",
			Waiting: why, Started: m.Started.UTC().Format("2006-01-02T15:04:05Z")})
	}
	sort.Slice(infos, func(i, k int) bool { return infos[i].ID < infos[k].ID })
	p.h.setWaiting(infos)
	sort.Slice(mine, func(i, k int) bool { return mine[i].ID < mine[k].ID })
	return mine
}

// handoverWait bounds how long a session handed over waits for its running
// firings to end (and be recorded) before it stops: what still runs then
// runs again at the next owner.
const handoverWait = 30 * time.Second

// rebalance hands over the sessions this member runs beyond its share of
// the deployment's (session.Rebalance), once the members stayed the same
// for the settle period, and returns their ids. The members' next scan
// places them as any session nobody runs.
func (p *placer) rebalance(ctx context.Context) []string {
	if p.rb == nil {
		return nil
	}
	members, err := p.ms.Members(ctx)
	if err != nil || !p.rb.Due(members) {
		return nil
	}
	held := p.h.movable()
	moves := session.Rebalance(held, p.ms.Self(), members)
	if len(moves) == 0 {
		return nil
	}
	p.rb.Moved(moves)
	began := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(moves))
	for i, id := range moves {
		wg.Add(1)
		go func() { // owned by rebalance: waited for below
			defer wg.Done()
			errs[i] = p.h.handover(ctx, id)
		}()
	}
	wg.Wait()
	took := time.Since(began).Round(time.Millisecond)
	for i, id := range moves {
		if errs[i] != nil {
			fmt.Fprintf(p.stderr, "session %s handed over to the deployment in %v; a firing that still ran was cut short (%v): it runs again at the next owner\n", id, took, errs[i])
			continue
		}
		fmt.Fprintf(p.stderr, "session %s handed over to the deployment in %v\n", id, took)
	}
	return moves
}

// movable lists the sessions the host runs, as placement sees them.
func (h *host) movable() []session.Wanted {
	h.mu.Lock()
	entries := append([]*hosted(nil), h.entries...)
	h.mu.Unlock()
	var out []session.Wanted
	for _, e := range entries {
		h.mu.Lock()
		stopped := e.stopped
		h.mu.Unlock()
		if stopped {
			continue
		}
		select {
		case <-e.s.Done():
			continue
		default:
		}
		w := session.Wanted{ID: e.info.ID, File: absPath(e.info.File)}
		if g := e.s.System().Graph(); g != nil {
			w.Labels, _ = session.PlacementOf(g)
		}
		out = append(out, w)
	}
	return out
}

// handover stops serving session id so that another member runs it
// (session.Handover): the host forgets it, its running firings end and
// are recorded (within handoverWait), its lease is released at once.
func (h *host) handover(ctx context.Context, id string) error {
	h.mu.Lock()
	var e *hosted
	for i, x := range h.entries {
		if x.info.ID == id && !x.stopped {
			e = x
			h.entries = append(h.entries[:i:i], h.entries[i+1:]...)
			break
		}
	}
	if e == nil {
		h.mu.Unlock()
		return nil
	}
	e.stopped = true
	h.mu.Unlock()
	for _, sub := range e.subs {
		_ = sub.Unsubscribe()
	}
	ctx, cancel := context.WithTimeout(ctx, handoverWait)
	defer cancel()
	err := e.s.Handover(ctx)
	e.forget()
	return err
}

// setWaiting replaces the sessions this member lists as waiting for a
// member, and answers `switchyard explain` for them (nobody runs them to
// answer).
func (h *host) setWaiting(list []SessionInfo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	keep := map[string]bool{}
	for _, w := range list {
		keep[w.ID] = true
	}
	for id, sub := range h.waitSubs {
		if !keep[id] {
			_ = sub.Unsubscribe()
			delete(h.waitSubs, id)
		}
	}
	if h.waitSubs == nil {
		h.waitSubs = map[string]*nats.Subscription{}
	}
	for _, w := range list {
		if _, ok := h.waitSubs[w.ID]; ok {
			continue
		}
		why := w.Waiting
		id := w.ID
		sub, err := h.b.Conn().Subscribe(broker.Control(id, "explain"), func(m *nats.Msg) {
			if broker.ServerReply(m) {
				return
			}
			// Taken since this member's last scan: the session answers.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			o, err := session.ReadOwner(ctx, h.b, id, time.Now())
			cancel()
			if err != nil || o != nil {
				return
			}
			var req actors.ExplainRequest
			_ = json.Unmarshal(m.Data, &req)
			data, _ := json.Marshal(actors.ExplainReply{Node: req.Node,
				Explain: fmt.Sprintf("session %s is not running: %s", id, why), States: []actors.GateState{}})
			_ = broker.Respond(m, data)
		})
		if err == nil {
			h.waitSubs[id] = sub
		}
	}
	h.waiting = list
}
