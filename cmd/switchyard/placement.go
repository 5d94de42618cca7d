package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
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
	graphs  map[string]*graph.Graph // stored graphs, by session
	strikes map[string]int
	waiting map[string]string // session -> why it waits (said once)
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
		case to == self.ID:
			mine = append(mine, byID[w.ID])
			delete(p.strikes, w.ID)
		default:
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
