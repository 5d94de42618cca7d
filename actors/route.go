package actors

import (
	"slices"
	"strconv"
	"strings"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/edges"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/internal/crash"
	"github.com/switchyard/switchyard/nodes"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/scheduler"
)

// hop is one envelope to publish: on an edge, or a jump to a node's inbox.
type hop struct {
	edge *graph.Edge // nil for a jump
	to   string
	env  *pb.Envelope
	ctx  map[string]string // the whole context env carries (held for its receiver)
}

// committed is what the firing's I/O (commit, events, publications) did,
// sent back to the actor that handed it out.
type committed struct {
	consumed  []string
	published bool // every output is out: the inputs may be acknowledged
	term      *Terminal
	async     bool // the firing's record went through an AsyncJournal
	job       *job // the firing's, released once this is taken (settled)
}

// finish applies a handler's outcome: context, routing, the commit record
// and the envelopes to publish, on the actor goroutine; then, in a durable
// session, it hands the I/O (the journal commit, the events, the
// publications) to the node's runner goroutine, which reports back with
// committed. It returns false when nothing was handed out (the session is
// stopping, or it is not durable and the firing was completed in place).
func (a *nodeActor) finish(m *runDone) bool {
	j := m.res
	o := j.outcome
	job := a.cur
	a.cur = nil
	charged := job.endMeter() // reported later, usage is not charged again
	if a.s.ctx.Err() != nil {
		// The session is stopping: the firing is not recorded, so a resume
		// runs it again (with the same attempt ids).
		return false
	}
	if t := a.ticket; t != nil {
		a.ticket = nil
		// Usage reported during the run was charged then; charge the rest.
		rest := o.Usage
		rest.InputTokens -= charged.InputTokens
		rest.OutputTokens -= charged.OutputTokens
		rest.Cost -= charged.Cost
		if rest.InputTokens < 0 || rest.OutputTokens < 0 || rest.Cost < 0 {
			rest = nodes.Usage{}
		}
		in, tick := inputHash(job.batch)
		a.s.emitScheduler(a.s.sched.Release(t, scheduler.Result{InputHash: in, Tick: tick, Status: string(o.Status), OutputHash: outputHash(o),
			Failure: o.FailureReason, Usage: scheduler.Usage{InputTokens: rest.InputTokens, OutputTokens: rest.OutputTokens, Cost: rest.Cost}}))
	}
	if m := job.ctx["join.missing"]; m != "" {
		if o.ContextUpdates == nil {
			o.ContextUpdates = map[string]string{}
		}
		o.ContextUpdates["join.missing"] = m
		if o.Notes == "" {
			o.Notes = "fired without " + m
		}
	}
	ctx := job.ctx
	bs := job.branches
	for _, e := range job.batch {
		if e.GetKind() == KindTick && e.GetFromNode() == a.node.ID {
			a.tickPending = false
		}
	}
	a.s.threads.learn(o.ContextUpdates)

	// No live edit swaps the graph between routing and publishing: the
	// runner releases the lock once the envelopes are out.
	a.s.editMu.RLock()

	// Context: the handler's updates, then the engine's keys (spec 3.2 step 4).
	var updates map[string]string // for the branch stack, when the token is in one
	if len(bs) > 0 {
		updates = make(map[string]string, len(o.ContextUpdates)+4)
	}
	set := func(k, v string) {
		ctx[k] = v
		job.changed = append(job.changed, k)
		if updates != nil {
			updates[k] = v
		}
	}
	for k, v := range o.ContextUpdates {
		set(k, v)
	}
	if o.Status != nodes.StatusSkipped {
		set("outcome", string(o.Status))
		if o.PreferredLabel != "" {
			set("preferred_label", o.PreferredLabel)
		}
		if a.outcomeKey == "" {
			// Both in one allocation.
			k := "internal.outcome." + a.node.ID + "internal.retry_count." + a.node.ID
			n := len("internal.outcome.") + len(a.node.ID)
			a.outcomeKey, a.retryKey = k[:n], k[n:]
		}
		set(a.outcomeKey, string(o.Status))
		set(a.retryKey, strconv.Itoa(j.attempts-1))
	}
	recordUpdates(bs, updates)

	hops, term := a.route(job, o, ctx, bs)
	if term != nil && term.Status == "fail" {
		if term.Cause == nil {
			term.Cause = j.cause
		}
		if p := o.ContextUpdates[nodes.ChildFailedPathKey]; p != "" && o.Status == nodes.StatusFail {
			term.Path = strings.Split(p, "/") // a child pipeline's node failed
			term.ChildCause = o.ContextUpdates[nodes.ChildFailedCauseKey]
		}
	}
	// The receivers of the envelopes take their context from here.
	a.holdContexts(hops)
	consumed := job.consumed1[:0]
	if len(job.batch) > len(job.consumed1) {
		consumed = make([]string, 0, len(job.batch))
	}
	consumed = consumed[:len(job.batch)]
	for i, e := range job.batch {
		consumed[i] = e.GetId()
	}
	var ctxKV []*pb.KV
	base := ""
	switch {
	case job.tc.base != "":
		ctxKV, base, _ = job.hopContext(ctx, false) // the delta its envelopes carry
	case a.s.commitWhole:
		ctxKV = a.s.wholeContext(a.node.ID, ctx)
	}
	commit := &job.commit
	*commit = Commit{Node: a.node.ID, Firing: job.firing, Status: string(o.Status), Reason: o.FailureReason,
		Consumed: consumed, Context: ctxKV, Base: base, Terminal: term, Seqs: a.seqsInto(job.seqs1[:0], consumed), Floor: a.floor()}
	// Pure when the node is, its outputs go on to other firings (whose
	// records take its own: one with none is waited for, as a scheduled
	// diamond's tick), and none of its inputs came from the work stream.
	commit.Pure = a.pure && len(hops) > 0 && !slices.ContainsFunc(commit.Seqs, func(seq uint64) bool { return seq != 0 })
	if u := o.Usage; u.InputTokens != 0 || u.OutputTokens != 0 || u.Cost != 0 {
		commit.Usage = &pb.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, Cost: u.Cost}
	}
	if len(hops) == 1 {
		commit.Produced = append(job.produced1[:0], hops[0].env) // in the job's own room
	} else {
		for _, h := range hops {
			commit.Produced = append(commit.Produced, h.env)
		}
	}

	eb := a.completedEvent()
	ev := &eb.ev
	ev.Status, ev.Attempts, ev.DurationMs, ev.Usage, ev.Message = string(o.Status), uint32(j.attempts), durationMS(j.dur), commit.Usage, summary(o)
	if o.Status == nodes.StatusFail || o.FailureReason != "" {
		eb.add("failure_reason", o.FailureReason)
	}
	if o.Continue != "" && o.Status != nodes.StatusFail {
		eb.add("continue", string(o.Continue))
	}
	ev.Attrs = append(ev.Attrs, callerAttrs(job.caller)...)
	if len(ev.Attrs) == 0 {
		ev.Attrs = nil // as before: no attributes is a nil list
	}
	if a.s.cfg.JetStream == nil {
		// Not durable: the commit only updates the journal in memory (its
		// file is written in the background) and core NATS publications
		// are buffered writes — nothing here blocks, so it runs in place,
		// without two goroutine hops per firing.
		done := a.commitAndPublish(commit.Node, commit, ev, o, j.attempts, hops)
		a.s.editMu.RUnlock()
		a.committedDone(done)
		// Nothing refers to the job any more, as for a durable firing once
		// settled: its outputs are out, its inputs acknowledged, and the
		// journal keeps none of its lists. (Not released, a job a firing
		// was 17 KB of a 10-node pipeline's Run.)
		releaseJob(job)
		return false
	}
	self := a.s.pidOf(a.node.ID)
	if aj, ok := a.s.cfg.Journal.(AsyncJournal); ok && self != nil {
		job.self, job.o, job.attempts, job.ev, job.hops = self, o, j.attempts, ev, hops
		a.commitAsync(aj, job)
		return false
	}
	if self == nil || !a.s.runOn(&a.runner, func() {
		defer a.s.editMu.RUnlock()
		done := a.commitAndPublish(commit.Node, commit, ev, o, j.attempts, hops)
		a.s.root.Send(self, done)
	}) {
		a.s.editMu.RUnlock()
		return false
	}
	return true
}

// commitAsync hands a firing's record to the journal and lets the node go
// on: the node fires its next input while the record is on its way (the
// journal batches the records that queue meanwhile). Once the record is
// stored, the node's io goroutine emits the firing's events and publishes
// its outputs, and reports back (settled) for the inputs to be
// acknowledged: an acknowledged input always has its firing journaled.
// The read lock on the graph taken in finish is released there.
// The job carries the firing (its commit, self, o, attempts, ev, hops),
// and its settleFn, made once per job, is the journal's done.
func (a *nodeActor) commitAsync(aj AsyncJournal, j *job) {
	a.inflight++
	crash.Point("before-commit")
	if j.settleFn == nil {
		j.settleFn = func(err error) { j.a.s.settle(j.a, j.self, settledFiring{j: j, err: err}) }
	}
	aj.CommitAsync(a.s.ctx, &j.commit, j.settleFn)
}

// settledFiring is a firing whose record the journal stored (err nil) or
// could not store, waiting for its node's io goroutine.
type settledFiring struct {
	j   *job
	err error
}

// settled is what a node's io goroutine did with the firings it took at
// once (settleAll), sent back to the node's actor in one message: the
// journal tells the committers of a batch one after the other, hundreds
// of records of one node in a flood, and each used to cost its own
// scheduling on the io goroutine and its own actor message.
type settled struct {
	done []committed
}

// settle queues a firing whose record was written for a's io goroutine,
// from the journal's writer (done must not block): the first one queued
// schedules settleAll, which takes every firing queued by the time it
// runs. When the session is stopping, nothing is done with them (a resume
// deals with the firings) and the read locks their finish took are
// released.
func (s *System) settle(a *nodeActor, self *actor.PID, f settledFiring) {
	s.settleMu.Lock()
	q, scheduled := s.settling[a]
	if s.settling == nil {
		s.settling = map[*nodeActor][]settledFiring{}
	}
	s.settling[a] = append(q, f)
	s.settleMu.Unlock()
	if scheduled {
		return // settleAll has not taken the queue yet: it takes f as well
	}
	if !s.runOn(&a.io, func() { a.settleAll(self) }) {
		for range s.takeSettled(a) {
			s.editMu.RUnlock()
		}
	}
}

// takeSettled takes the firings queued for a (settle).
func (s *System) takeSettled(a *nodeActor) []settledFiring {
	s.settleMu.Lock()
	defer s.settleMu.Unlock()
	q := s.settling[a]
	delete(s.settling, a)
	return q
}

// settleAll does, on a's io goroutine, what each firing queued for it does
// once its record is written (afterCommit), in the order of their records,
// and reports them back to the node's actor in one message.
func (a *nodeActor) settleAll(self *actor.PID) {
	fs := a.s.takeSettled(a)
	if len(fs) == 0 {
		return
	}
	m := &settled{done: make([]committed, len(fs))}
	// The node that receives the first output handed over whose mailbox
	// needs a goroutine runs on this one once this function returns
	// (warmPool.carry): in a chain, the hop goes on without a wake-up.
	io := a.io.Load() // this goroutine's
	a.s.warm.carry(io)
	defer a.s.warm.uncarry(io)
	for i := range fs {
		f := &fs[i]
		j := f.j
		m.done[i] = a.afterCommit(j.commit.Node, &j.commit, f.err, j.ev, j.o, j.attempts, j.hops)
		if f.err == nil {
			m.done[i].job = j // released once its report is taken
		}
		a.s.editMu.RUnlock()
	}
	// Every output of these firings is out; none of their inputs is
	// acknowledged yet.
	crash.Point("settled")
	a.s.root.Send(self, m)
}

// commitAndPublish is a firing's I/O, on the node's runner goroutine:
// commit the record, emit the node's events, publish its outputs.
func (a *nodeActor) commitAndPublish(node string, commit *Commit, ev *pb.Event, o *nodes.Outcome, attempts int, hops []hop) *committed {
	crash.Point("before-commit")
	done := a.afterCommit(node, commit, a.s.cfg.Journal.Commit(a.s.ctx, commit), ev, o, attempts, hops)
	return &done
}

// afterCommit is what a firing does once its commit returned err: emit the
// node's events and publish its outputs.
func (a *nodeActor) afterCommit(node string, commit *Commit, err error, ev *pb.Event, o *nodes.Outcome, attempts int, hops []hop) committed {
	done := committed{consumed: commit.Consumed, term: commit.Terminal}
	if err != nil {
		a.s.log.Error("actors: journal commit", "node", node, "err", err)
		done.term = nil
		if a.s.ctx.Err() != nil {
			return done // stopping: the firing will be replayed on resume
		}
		// Nothing of the firing is recorded, published or acknowledged: the
		// journal holds the state before it, and a resume runs it again.
		a.s.fatal("node " + node + ": checkpoint failed: " + err.Error())
		return done
	}
	published := true
	crash.Point("after-commit")
	// The node's events go before its outputs, so whatever the outputs
	// cause downstream is reported after them (and a session's last node
	// cannot complete the session before an earlier node's events).
	a.s.Emit(ev)
	if o.Status == nodes.StatusFail {
		a.s.Emit(&pb.Event{Kind: "node.failed", Node: node, Status: string(o.Status),
			Attempts: uint32(attempts), Message: o.FailureReason})
	}
	for _, h := range hops {
		kind := "edge.selected"
		if h.edge == nil {
			kind = "node.jump"
		}
		if !a.s.Wanted(kind) {
			continue // nobody would see it: not built
		}
		e := &pb.Event{Kind: kind, Node: node, Attrs: []*pb.KV{{Key: "to", Value: h.to}}}
		if h.edge != nil {
			e.EdgeId, _ = a.s.edgeNames(h.edge)
			e.Message = h.edge.Label()
		}
		a.s.EmitWanted(e)
	}
	for i, h := range hops {
		if i > 0 {
			crash.Point("between-publish")
		}
		var subj, edge string
		if h.edge != nil {
			edge, subj = a.s.edgeNames(h.edge)
		} else {
			subj = broker.NodeIn(a.s.cfg.SessionID, h.to)
		}
		if a.s.cfg.Consume && a.s.handOver(subj, edge, h.env) {
			crash.Point("handed")
			continue
		}
		if !a.s.cfg.Consume && a.s.handLocal(subj, edge, h.env) {
			continue
		}
		if err := a.s.Send(a.s.ctx, subj, h.env); err != nil {
			if a.s.cfg.Consume {
				// Not acknowledged: the journal holds the envelope as
				// pending, and a resume publishes it again. A session
				// stopping meanwhile is not a failure.
				published = false
				if a.s.ctx.Err() == nil {
					a.s.log.Error("actors: publish", "subject", subj, "err", err)
					a.s.fatal("node " + node + ": publishing on " + subj + " failed: " + err.Error())
				}
				break
			}
			if a.s.ctx.Err() == nil {
				a.s.log.Error("actors: publish", "subject", subj, "err", err)
			}
		}
	}
	crash.Point("after-publish")
	done.published = published
	return done
}

// committedDone takes a firing's I/O report back on the actor goroutine:
// the consumed envelopes are acknowledged once its outputs are out, and a
// token's path that ended is reported.
func (a *nodeActor) committedDone(m *committed) {
	if m.published {
		a.acknowledge(m.consumed)
		crash.Point("after-ack")
	}
	if m.term != nil && a.s.cfg.OnTerminal != nil {
		a.s.cfg.OnTerminal(a.node.ID, m.term)
	}
}

// FNV-1a, 64 bits (hash/fnv's New64a), over strings without the
// hash.Hash's interface and []byte conversions (an allocation each).
const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

func fnvString[T string | []byte](h uint64, s T) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime64
	}
	return h
}

func fnvByte(h uint64, b byte) uint64 {
	h ^= uint64(b)
	return h * fnvPrime64
}

// outputHash identifies an outcome's output for stall detection: the
// response and the context updates.
func outputHash(o *nodes.Outcome) string {
	h := fnvString(fnvOffset64, o.Response)
	var room [8]string // the keys, sorted: on the stack when they fit
	keys := room[:0]
	for k := range o.ContextUpdates {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		h = fnvByte(h, 0)
		h = fnvString(h, k)
		h = fnvByte(h, 0)
		h = fnvString(h, o.ContextUpdates[k])
	}
	return strconv.FormatUint(h, 16)
}

// inputHash identifies what a firing consumed for stall detection: each
// envelope's root (rootOf: the outside envelope or tick its chain of
// firings started from), kind, sender, message, structured payload and
// status, never its own id or the context it carries. Inputs of two
// roots are never the same input: the same text sent twice from outside,
// and whatever two events cause downstream, is two pieces of work, not a
// node going round in circles (a loop's envelopes keep their root). tick
// reports a firing on clock ticks or triggers alone (ticks the node did
// not send itself).
func inputHash(batch []*pb.Envelope) (hash string, tick bool) {
	h := uint64(fnvOffset64)
	tick = true
	for _, e := range batch {
		if e.GetKind() != KindTick || e.GetFromNode() != "" {
			tick = false
		}
		for _, s := range [...]string{rootOf(e), e.GetKind(), e.GetFromNode(), e.GetPayload().GetMessage(), e.GetOutcome().GetStatus()} {
			h = fnvString(h, s)
			h = fnvByte(h, 0)
		}
		if st := e.GetPayload().GetStructured(); st != nil {
			b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(st)
			h = fnvString(h, b)
		}
		h = fnvByte(h, 1)
	}
	return strconv.FormatUint(h, 16), tick
}

// summary is the one-line text of an outcome for events.
func summary(o *nodes.Outcome) string {
	s := o.Response
	if o.Status == nodes.StatusFail && o.FailureReason != "" {
		s = o.FailureReason
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// route decides where the token goes after this node (spec 3.2-3.7 with
// DESIGN decisions 3 and 6). It returns the envelopes to send and, when the
// token's path ends, a Terminal.
func (a *nodeActor) route(j *job, o *nodes.Outcome, ctx map[string]string, bs []*pb.Branch) ([]hop, *Terminal) {
	g := a.s.graph()
	env := edges.Outcome{Status: string(o.Status), PreferredLabel: o.PreferredLabel, SuggestedNextIDs: o.SuggestedNextIDs}
	out := g.OutEdges(a.node.ID)

	if a.typ == graph.TypeExit {
		return a.exitRoute(j, o, ctx, bs)
	}
	if o.Continue != "" && o.Status != nodes.StatusFail {
		return a.continueRoute(j, o, ctx, bs), nil
	}
	session := a.s.isSession()
	if session && a.typ == graph.TypeHuman {
		// A human gate's routing policy is to select, in sessions as in
		// pipelines: the answer's edge only. A gate with no answer follows
		// only an edge whose condition names the failure.
		var e *graph.Edge
		if o.Status == nodes.StatusFail {
			e = edges.Match(g, a.node.ID, env, ctx)
		} else {
			e = edges.Select(g, a.node.ID, env, ctx)
		}
		if e == nil {
			return a.endOfPath(j, o, ctx, bs)
		}
		return []hop{a.edgeHop(j, e, o, ctx, bs)}, nil
	}
	if session || a.typ == graph.TypeParallel {
		sel := edges.Broadcast(g, a.node.ID, env, ctx)
		if session && o.Status == nodes.StatusFail && a.typ != graph.TypeConditional &&
			a.node.Attrs.String("on_failure") != "route" {
			sel = failureEdges(g, sel)
		}
		if len(sel) == 0 {
			return a.endOfPath(j, o, ctx, bs)
		}
		if a.typ == graph.TypeParallel {
			return a.fork(j, o, ctx, bs, sel), nil
		}
		hops := make([]hop, 0, len(sel))
		for _, e := range sel {
			hops = append(hops, a.edgeHop(j, e, o, ctx, cloneBranches(bs)))
		}
		return hops, nil
	}
	if o.Status == nodes.StatusFail && a.typ != graph.TypeConditional {
		// A diamond routes on the outcome it passes through; for any other
		// node, failure routing applies (DESIGN decision 3).
		switch a.node.Attrs.String("on_failure") {
		case "exit":
			return nil, &Terminal{Status: "fail", Reason: failReason(a.node.ID, o), Final: true}
		case "route":
			if e := edges.Select(g, a.node.ID, env, ctx); e != nil {
				return []hop{a.edgeHop(j, e, o, ctx, bs)}, nil
			}
		default:
			if e := edges.Match(g, a.node.ID, env, ctx); e != nil {
				return []hop{a.edgeHop(j, e, o, ctx, bs)}, nil
			}
			for _, t := range []string{a.node.RetryTarget(), a.node.FallbackRetryTarget(),
				g.Attrs.String("retry_target"), g.Attrs.String("fallback_retry_target")} {
				if t != "" && g.Node(t) != nil {
					return []hop{a.jump(j, t, o, ctx, bs)}, nil
				}
			}
			for _, e := range out {
				if e.Cond == nil && e.Condition() == "" {
					if n := g.Node(e.To); n != nil && g.HandlerType(n) == graph.TypeConditional {
						return []hop{a.edgeHop(j, e, o, ctx, bs)}, nil
					}
				}
			}
		}
		if join := innerJoin(bs); join != "" {
			return []hop{a.jump(j, join, o, ctx, bs)}, nil
		}
		return nil, &Terminal{Status: "fail", Reason: failReason(a.node.ID, o), Final: true}
	}
	e := edges.Select(g, a.node.ID, env, ctx)
	if e == nil {
		return a.endOfPath(j, o, ctx, bs)
	}
	return []hop{a.edgeHop(j, e, o, ctx, bs)}, nil
}

// continueRoute keeps a node that is not done working: a tick to itself
// (one at a time), or nothing (it waits for its next input).
func (a *nodeActor) continueRoute(j *job, o *nodes.Outcome, ctx map[string]string, bs []*pb.Branch) []hop {
	if o.Continue != nodes.ContinueTick || a.tickPending {
		return nil
	}
	a.tickPending = true
	h := a.jump(j, a.node.ID, o, ctx, bs)
	h.env.Kind = KindTick
	h.env.Id = a.s.envelopeID(a.node.ID, j.firing, "tick")
	return []hop{h}
}

// failureEdges keeps, of the edges a failed firing's outcome satisfies in
// a session, those that expect a failure: an edge with a condition (such
// as outcome=fail), or an unconditional one into a diamond, which routes
// on the outcome it passes through. A failure never falls through to
// work along an unconditional edge (DESIGN decision 3, applied to
// broadcasting); on_failure=route keeps them all.
func failureEdges(g *graph.Graph, sel []*graph.Edge) []*graph.Edge {
	kept := sel[:0:0]
	for _, e := range sel {
		if e.Cond != nil || e.Condition() != "" {
			kept = append(kept, e)
		} else if n := g.Node(e.To); n != nil && g.HandlerType(n) == graph.TypeConditional {
			kept = append(kept, e)
		}
	}
	return kept
}

// endOfPath handles a node with no usable outgoing edge.
func (a *nodeActor) endOfPath(j *job, o *nodes.Outcome, ctx map[string]string, bs []*pb.Branch) ([]hop, *Terminal) {
	if join := innerJoin(bs); join != "" && join != a.node.ID {
		// A branch that ends before its fan-in still reports there.
		return []hop{a.jump(j, join, o, ctx, bs)}, nil
	}
	if a.s.isSession() {
		// A reactive session never ends by itself: the token's path does.
		return nil, nil
	}
	if o.Status == nodes.StatusFail {
		return nil, &Terminal{Status: "fail", Reason: failReason(a.node.ID, o), Final: len(bs) == 0}
	}
	return nil, &Terminal{Status: "success", Final: len(bs) == 0 && !a.s.isSession()}
}

// exitRoute checks goal gates at the exit node (spec 3.4).
func (a *nodeActor) exitRoute(j *job, o *nodes.Outcome, ctx map[string]string, bs []*pb.Branch) ([]hop, *Terminal) {
	g := a.s.graph()
	var unsatisfied []*graph.Node
	for _, n := range g.Nodes {
		if !n.GoalGate() {
			continue
		}
		st, visited := ctx["internal.outcome."+n.ID]
		if visited && !nodes.Status(st).IsSuccess() {
			unsatisfied = append(unsatisfied, n)
		}
	}
	if len(unsatisfied) == 0 {
		return nil, &Terminal{Status: "success", Final: true}
	}
	n := unsatisfied[0]
	for _, t := range []string{n.RetryTarget(), n.FallbackRetryTarget(),
		g.Attrs.String("retry_target"), g.Attrs.String("fallback_retry_target")} {
		if t != "" && g.Node(t) != nil {
			a.s.Emit(&pb.Event{Kind: "goal_gate.unsatisfied", Node: n.ID, Status: ctx["internal.outcome."+n.ID],
				Message: "goal gate " + n.ID + " is not satisfied; retrying at " + t})
			return []hop{a.jump(j, t, o, ctx, bs)}, nil
		}
	}
	return nil, &Terminal{Status: "fail", Final: true,
		Reason: "goal gate " + n.ID + " is not satisfied (status " + ctx["internal.outcome."+n.ID] + ") and has no retry target"}
}

// fork starts one branch per selected edge of a parallel node.
func (a *nodeActor) fork(j *job, o *nodes.Outcome, ctx map[string]string, bs []*pb.Branch, sel []*graph.Edge) []hop {
	forkID := a.s.cfg.SessionID + "." + a.node.ID + "." + strconv.FormatUint(j.firing, 10)
	base := kvList(ctx)
	hops := make([]hop, 0, len(sel))
	for _, e := range sel {
		nb := append(cloneBranches(bs), &pb.Branch{ForkNode: a.node.ID, Branch: e.To, Base: base,
			ForkId: forkID, Width: uint32(len(sel)), JoinNode: a.s.topo.Load().joins[a.node.ID]})
		bctx := make(map[string]string, len(ctx)+1)
		for k, v := range ctx {
			bctx[k] = v
		}
		bctx["parallel.branch"] = e.To
		hops = append(hops, a.edgeHop(j, e, o, bctx, nb, "parallel.branch"))
	}
	return hops
}

// edgeNames is an edge's id (edges.EdgeID) and subject, made once per
// edge rather than at every firing. They are kept by the edge (a word to
// hash, where its ends and index were two strings and an int): a live
// edit's graph has new edges, named again, and the names of edges no
// graph has any more are let go once the names kept pass a bound. The id
// kept is the end of the subject.
func (s *System) edgeNames(e *graph.Edge) (id, subject string) {
	s.edgeMu.RLock()
	n, ok := s.edgeSubjects[e]
	s.edgeMu.RUnlock()
	if !ok {
		id := namesOf(s.graph()).edgeID(e) // made once per graph
		n = edgeName{subject: broker.Edge(s.cfg.SessionID, id)}
		n.prefix = len(n.subject) - len(id)
		s.edgeMu.Lock()
		if limit := 2*len(s.graph().Edges) + maxEdgeNames; s.edgeSubjects == nil || len(s.edgeSubjects) >= limit {
			// Made at the first firing (an idle session holds none); past
			// the bound, mostly edges live edits removed.
			s.edgeSubjects = make(map[*graph.Edge]edgeName, min(len(s.graph().Edges), maxEdgeNames))
		}
		s.edgeSubjects[e] = n
		s.edgeMu.Unlock()
	}
	return n.subject[n.prefix:], n.subject
}

// edgeName is an edge's subject and where its id starts in it.
type edgeName struct {
	subject string
	prefix  int
}

// maxEdgeNames is what edgeNames keeps beyond twice the graph's edges,
// and the most its table is sized for at first.
const maxEdgeNames = 1024

// edgeHop sends the token on e with ctx: the firing's context, or (extra
// names the keys it adds) a fork branch's.
func (a *nodeActor) edgeHop(j *job, e *graph.Edge, o *nodes.Outcome, ctx map[string]string, bs []*pb.Branch, extra ...string) hop {
	whole := false
	if e.LoopRestart() {
		// loop_restart: the run starts again at the target, with the graph's
		// keys only and a fresh log directory.
		ctx = restartContext(ctx)
		bs, whole = nil, true
		a.s.Emit(&pb.Event{Kind: "session.restarted", Node: e.To, Message: "loop_restart from " + a.node.ID,
			Attrs: []*pb.KV{{Key: "generation", Value: ctx["internal.run_generation"]}}})
	}
	kvs, base, version := j.hopContext(ctx, whole, extra...)
	id, _ := a.s.edgeNames(e)
	return hop{edge: e, to: e.To, env: a.envelope(j, e.To, id, o, kvs, base, version, bs), ctx: ctx}
}

// jump sends the token to a node's inbox with the firing's context.
func (a *nodeActor) jump(j *job, to string, o *nodes.Outcome, ctx map[string]string, bs []*pb.Branch) hop {
	kvs, base, version := j.hopContext(ctx, false)
	return hop{to: to, env: a.envelope(j, to, "", o, kvs, base, version, bs), ctx: ctx}
}

// innerJoin is the fan-in node of the innermost branch, if any.
func innerJoin(bs []*pb.Branch) string {
	if len(bs) == 0 {
		return ""
	}
	return bs[len(bs)-1].GetJoinNode()
}

func failReason(node string, o *nodes.Outcome) string {
	if o.FailureReason != "" {
		return node + ": " + o.FailureReason
	}
	return node + " failed"
}

// restartContext is the context a loop_restart starts from: the graph's
// keys only, and the next run generation.
func restartContext(ctx map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range ctx {
		if len(k) > 6 && k[:6] == "graph." {
			out[k] = v
		}
	}
	gen, _ := strconv.Atoi(ctx["internal.run_generation"])
	out["internal.run_generation"] = strconv.Itoa(gen + 1)
	return out
}
