package actors

import (
	"path/filepath"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/nodes"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// delivery is an envelope that arrived on one of the node's subjects.
type delivery struct {
	subject string
	env     *pb.Envelope
}

// runDone brings a handler's result back to the actor.
type runDone struct {
	firing uint64
	res    *runResult
}

// nodeActor is the actor of one node. Its fields are touched only from
// Receive (the actor's goroutine), except where noted.
type nodeActor struct {
	s    *System
	node *graph.Node
	typ  string
	h    nodes.Handler

	queue   [][]*pb.Envelope          // batches ready to fire, in arrival order
	joins   map[string][]*pb.Envelope // fan-in: fork id -> branch tokens arrived
	running bool
	cur     *job // the firing in progress
	visits  int
	firing  uint64
}

var _ actor.Actor = (*nodeActor)(nil)

func newNodeActor(s *System, n *graph.Node, typ string, h nodes.Handler) *nodeActor {
	return &nodeActor{s: s, node: n, typ: typ, h: h, joins: map[string][]*pb.Envelope{}}
}

// Receive never blocks: handlers run on goroutines owned by the System.
func (a *nodeActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *delivery:
		a.accept(m.env)
		a.tryFire(c)
	case *runDone:
		a.running = false
		a.finish(m)
		a.tryFire(c)
	}
}

// accept queues an arriving envelope, joining parallel branches at a fan-in.
func (a *nodeActor) accept(env *pb.Envelope) {
	if bs := env.GetBranches(); a.typ == graph.TypeFanIn && len(bs) > 0 {
		top := bs[len(bs)-1]
		if top.GetJoinNode() == a.node.ID {
			arrived := append(a.joins[top.GetForkId()], env)
			if uint32(len(arrived)) < top.GetWidth() {
				a.joins[top.GetForkId()] = arrived
				a.s.Emit(&pb.Event{Kind: "node.waiting", Node: a.node.ID,
					Message: "join incomplete: " + strconv.Itoa(len(arrived)) + " of " + strconv.FormatUint(uint64(top.GetWidth()), 10) + " branches arrived"})
				return
			}
			delete(a.joins, top.GetForkId())
			a.queue = append(a.queue, arrived)
			return
		}
	}
	a.queue = append(a.queue, []*pb.Envelope{env})
}

// tryFire starts the handler on the next ready batch if the node is idle.
func (a *nodeActor) tryFire(c actor.Context) {
	if a.running || len(a.queue) == 0 || a.s.stoppedNow() {
		return
	}
	batch := a.queue[0]
	a.queue = a.queue[1:]
	if reason := a.limitReached(); reason != "" {
		a.refuse(batch, reason)
		return
	}
	a.visits++
	a.firing++
	a.s.firings.Add(1)
	a.running = true
	firing := a.firing
	self := c.Self()
	job := a.prepare(batch, firing)
	a.cur = job
	a.s.Emit(&pb.Event{Kind: "node.started", Node: a.node.ID, Attempts: 1,
		Attrs: []*pb.KV{{Key: "firing", Value: strconv.FormatUint(firing, 10)}, {Key: "type", Value: a.typ}}})
	if !a.s.goFunc(func() {
		res := a.run(a.s.ctx, job)
		a.s.root.Send(self, &runDone{firing: firing, res: res})
	}) {
		a.running = false
	}
}

// limitReached checks the node's visit bound and the graph's firing bound
// (DESIGN decision 9).
func (a *nodeActor) limitReached() string {
	g := a.s.cfg.Graph
	maxVisits := g.MaxVisits()
	if v, ok := a.node.Attrs.Int("max_visits"); ok {
		maxVisits = v
	}
	if v, ok := a.node.Attrs.Int("max_iterations"); ok {
		maxVisits = v
	}
	if maxVisits > 0 && a.visits >= maxVisits {
		return "node " + a.node.ID + " reached its limit of " + strconv.Itoa(maxVisits) + " visits (max_visits)"
	}
	if m := g.MaxIterations(); m > 0 && a.s.firings.Load() >= uint64(m) {
		return "session reached its limit of " + strconv.Itoa(m) + " node firings (graph max_iterations)"
	}
	return ""
}

// refuse ends the batch's token path because a bound was reached.
func (a *nodeActor) refuse(batch []*pb.Envelope, reason string) {
	a.s.Emit(&pb.Event{Kind: "iterations.exceeded", Node: a.node.ID, Message: reason})
	ids := make([]string, len(batch))
	for i, e := range batch {
		ids[i] = e.GetId()
	}
	t := &Terminal{Status: "fail", Reason: reason, Final: true}
	c := &Commit{Node: a.node.ID, Firing: a.firing, Consumed: ids, Terminal: t, Reason: reason,
		Context: batch[0].GetContext()}
	if err := a.s.cfg.Journal.Commit(a.s.ctx, c); err != nil {
		a.s.log.Error("actors: journal", "node", a.node.ID, "err", err)
	}
	if a.s.cfg.OnTerminal != nil {
		a.s.cfg.OnTerminal(a.node.ID, t)
	}
}

// job is everything a handler run needs, built on the actor goroutine.
type job struct {
	batch    []*pb.Envelope
	firing   uint64
	ctx      map[string]string // the token's context before the handler
	branches []*pb.Branch      // the token's branch stack after this node's join
	in       nodes.Input

	ctxKV   []*pb.KV          // the context after the firing, as a list
	ctxKVOf map[string]string // the map ctxKV was made from
}

func (a *nodeActor) prepare(batch []*pb.Envelope, firing uint64) *job {
	g := a.s.cfg.Graph
	first := batch[0]
	j := &job{batch: batch, firing: firing}
	bs := first.GetBranches()
	if a.typ == graph.TypeFanIn && len(bs) > 0 && bs[len(bs)-1].GetJoinNode() == a.node.ID {
		// The join: continue from the fork's context, keeping the engine's
		// internal keys every branch learned (goal gates need them).
		top := bs[len(bs)-1]
		j.ctx = ctxMap(top.GetBase())
		for _, env := range batch {
			eb := env.GetBranches()
			for _, kv := range eb[len(eb)-1].GetUpdates() {
				if len(kv.Key) > 9 && kv.Key[:9] == "internal." {
					j.ctx[kv.Key] = kv.Value
				}
			}
		}
		j.branches = cloneBranches(bs[:len(bs)-1])
	} else {
		j.ctx = ctxMap(first.GetContext())
		j.branches = cloneBranches(bs)
	}
	j.ctx["current_node"] = a.node.ID
	msgs := make([]nodes.Message, len(batch))
	for i, env := range batch {
		msgs[i] = toMessage(env)
	}
	gen, _ := strconv.Atoi(j.ctx["internal.run_generation"])
	logs := a.s.cfg.LogsDir
	if gen > 0 {
		logs = filepath.Join(logs, "restart-"+strconv.Itoa(gen))
	}
	prompt := a.node.Prompt()
	j.in = nodes.Input{
		SessionID: a.s.cfg.SessionID,
		Graph:     g,
		Node:      a.node,
		Type:      a.typ,
		Context:   j.ctx,
		Messages:  msgs,
		Prompt:    prompt,
		LogsDir:   logs,
		StageDir:  filepath.Join(logs, a.node.ID),
		WorkDir:   a.s.cfg.WorkDir,
	}
	return j
}

// toMessage shows an envelope to a handler.
func toMessage(env *pb.Envelope) nodes.Message {
	m := nodes.Message{
		ID:       env.GetId(),
		Kind:     env.GetKind(),
		From:     env.GetFromNode(),
		Edge:     env.GetEdgeId(),
		Text:     env.GetPayload().GetMessage(),
		Status:   nodes.Status(env.GetOutcome().GetStatus()),
		Response: env.GetPayload().GetMessage(),
	}
	if st := env.GetPayload().GetStructured(); st != nil {
		m.Structured = st.AsMap()
	}
	if bs := env.GetBranches(); len(bs) > 0 {
		top := bs[len(bs)-1]
		m.Branch = top.GetBranch()
		m.Updates = ctxMap(top.GetUpdates())
	}
	return m
}

// envelope builds the envelope a firing sends to target.
func (a *nodeActor) envelope(j *job, to, edgeID string, o *nodes.Outcome, ctx []*pb.KV, bs []*pb.Branch) *pb.Envelope {
	target := edgeID
	if target == "" {
		target = "jump." + to
	}
	env := &pb.Envelope{
		Id:        envelopeID(a.s.cfg.SessionID, a.node.ID, j.firing, target),
		SessionId: a.s.cfg.SessionID,
		Kind:      KindHandoff,
		FromNode:  a.node.ID,
		ToNode:    to,
		EdgeId:    edgeID,
		Iteration: j.firing,
		CreatedAt: timestamppb.New(a.s.clk.Now()),
		Payload:   &pb.Payload{Message: o.Response},
		Outcome: &pb.Outcome{Status: string(o.Status), PreferredLabel: o.PreferredLabel,
			SuggestedNextIds: o.SuggestedNextIDs, Notes: o.Notes, FailureReason: o.FailureReason},
		ContextUpdates: kvList(o.ContextUpdates),
		Context:        ctx,
		Branches:       bs,
	}
	if u := o.Usage; u.InputTokens != 0 || u.OutputTokens != 0 || u.Cost != 0 {
		env.Usage = &pb.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, Cost: u.Cost}
	}
	return env
}

func durationMS(d time.Duration) int64 { return d.Milliseconds() }
