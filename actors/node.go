package actors

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/edges"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/internal/crash"
	"github.com/switchyard/switchyard/nodes"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/scheduler"
)

// delivery is an envelope that arrived on one of the node's subjects.
type delivery struct {
	edge string // the edge id; "" for the inbox
	env  *pb.Envelope
	// ack: durable sessions, the JetStream delivery's reply subject, to
	// acknowledge the envelope on once it is consumed (ackHeld). Only the
	// subject is kept, not the message: a node may hold thousands of
	// envelopes, and the message's copy of the data and its parsed
	// headers (two thirds of a kilobyte) were live heap the collector
	// marked at every cycle while the node held it.
	ack string
	seq uint64 // its stream sequence
	// handed: a durable session's envelope handed over in process by the
	// firing that produced it, once that firing's record was stored
	// (nothing to acknowledge: it is in no stream; the journal holds it
	// as pending until the record of its consumption is stored).
	handed bool
}

// Causes of a handler's cancellation by the scheduler; both are
// scheduler.ErrBudgetExceeded for errors.Is.
var (
	errBudgetCancel error = budgetError("cancelled: a budget was spent during the run")
	errTimeBudget   error = budgetError("cancelled: the time budget ran out during the run")
)

// budgetError is a budget's cancellation of a run.
type budgetError string

func (e budgetError) Error() string        { return string(e) }
func (e budgetError) Is(target error) bool { return target == scheduler.ErrBudgetExceeded }

// firingCancel cancels a running firing with errBudgetCancel (and stops
// its deadline's timer); the zero value does nothing. Two fields, not a
// closure over them: one allocation less per firing.
type firingCancel struct {
	fc   *firingCtx
	stop context.CancelFunc
}

func (f firingCancel) cancel() {
	if f.fc != nil {
		f.fc.cancelCause(errBudgetCancel)
	}
	if f.stop != nil {
		f.stop()
	}
}

// trigger is an explicit trigger of the node.
type trigger struct{ env *pb.Envelope }

// drain asks the actor to take what its buffers hold (a debounce window
// ended).
type drain struct{}

// heldQuery asks the actor how many envelopes wait in its delivery
// buffers (explain); the answer is an int.
type heldQuery struct{}

// buffered counts the envelopes waiting in the node's delivery buffers,
// a debounce window's included.
func (a *nodeActor) buffered() int {
	n := 0
	for _, eb := range a.bufs {
		n += len(eb.b.Pending())
	}
	return n
}

// notice is a scheduler notice for this node.
type notice struct{ kind string }

// runDone brings a handler's result back to the actor.
type runDone struct {
	firing uint64
	res    *runResult
}

// nodeActor is the actor of one node. Its fields are touched only from
// Receive (the actor's goroutine).
type nodeActor struct {
	s    *System
	node *graph.Node
	typ  string
	h    nodes.Handler
	// inline: the handler never blocks for this node (nodes.Inliner) and
	// runs on the actor goroutine.
	inline bool
	// tickPending: the node sent itself a tick not yet fired (auto mode).
	tickPending bool
	// The node's other flags, together: a bool between two words costs a
	// word, and the actor (536 bytes, with the heap's 8-byte header of an
	// object over 512 bytes) must stay in the 576-byte size class — one
	// more word took every idle node 64 bytes further (2,107 B against the
	// 2 KB an idle node is held to).
	running  bool
	hasHead  bool // head holds the resolved context of queue[0]
	retiring bool // removed by a live edit: stop once idle
	emptied  bool // retiring: what the buffers held was discarded
	halted   bool // the scheduler stopped the node for good: what arrives is refused
	// tailed: the mailbox handed a firing to the runner (pinned.handOff)
	// that may still wait for the mailbox to run dry.
	tailed bool
	// pure: the handler has no effect outside the session for this node
	// (nodes.Pure; Commit.Pure).
	pure bool

	bufs  []edgeBuffer              // the inbox (""), then each incoming edge, in a fixed order
	queue [][]*pb.Envelope          // batches ready to fire, in arrival order
	joins map[string][]*pb.Envelope // fan-in: fork id -> branch tokens arrived (made on the first)
	cur   *job                      // the firing in progress
	// retry: the node's retry attributes, read at its first firing (run)
	retry   retrySettingsCache
	head    tokenContext // the resolved context of queue[0], when hasHead
	ticket  *scheduler.Ticket
	cancel  firingCancel
	firing  uint64
	waiting string // why the head batch waits (in-flight cap, lock), "" when not
	// gateSaid is what the last gate.waiting of the gate's waiting period
	// said ("" once the gate fired): a gate that goes on waiting for the
	// same thing says so once, not at every arrival (gateWaiting).
	gateSaid string
	// removedHeld: what the node's gate held when a live edit removed it
	removedHeld []*pb.Envelope

	// acks holds, in durable sessions, the JetStream deliveries (their
	// ack subjects and stream sequences, heldMsg) of the envelopes the
	// node holds, by envelope id, until they are consumed (made on the
	// first).
	acks    map[string]heldMsgs
	unacked seqSet // stream sequences held
	maxSeq  uint64 // the highest stream sequence received

	emitFn  func(kind string, fields map[string]any) // Input.Emit (emitter)
	mailbox pinned                                   // the goroutine that runs Receive
	// runner is the goroutine that runs the handler; io (durable
	// sessions) runs what a firing does once its record is stored: its
	// events and publications, while the runner already runs the next
	// firing. Both are made when first given work (System.runOn,
	// System.handOff): an idle node has neither (80 bytes each). inflight
	// counts the firings (and refusals) handed to the journal and not yet
	// reported back (committed).
	runner, io atomic.Pointer[pinned]
	inflight   int

	// self is the node's actor (set at its first message); pid the same,
	// set by its spawn and read under System.mu.
	self, pid *actor.PID

	// runFn runs the firing handed to the runner (handed), made on the
	// first firing; outcomeKey and retryKey are the context keys
	// internal.outcome.<node> and internal.retry_count.<node>, made then.
	runFn                func()
	handed               *job
	outcomeKey, retryKey string
}

// stopPinned ends the actor's goroutines (after the actor stopped).
func (a *nodeActor) stopPinned() {
	a.mailbox.stop()
	if r := a.runner.Load(); r != nil {
		r.stop()
	}
	if io := a.io.Load(); io != nil {
		io.stop()
	}
}

var _ actor.Actor = (*nodeActor)(nil)

func newNodeActor(s *System, g *graph.Graph, n *graph.Node, typ string, h nodes.Handler) (*nodeActor, error) {
	a := &nodeActor{s: s, node: n, typ: typ, h: h, inline: inlined(h, n), unacked: newSeqSet()}
	if err := a.setEdges(g); err != nil {
		return nil, err
	}
	return a, nil
}

// inlined reports whether h never blocks for n (nodes.Inliner).
func inlined(h nodes.Handler, n *graph.Node) bool {
	i, ok := h.(nodes.Inliner)
	return ok && i.Inline(n)
}

// edgeBuffer is the delivery buffer of one incoming edge ("": the inbox)
// and the delivery it was made for. A node keeps them in a slice, not a
// map: most nodes have one to three, and an idle node's maps were a third
// of its heap.
type edgeBuffer struct {
	id, spec string
	b        edges.Buffer[*pb.Envelope]
}

// buffer is the buffer of incoming edge id, nil when the node has none.
func (a *nodeActor) buffer(id string) edges.Buffer[*pb.Envelope] {
	for i := range a.bufs {
		if a.bufs[i].id == id {
			return a.bufs[i].b
		}
	}
	return nil
}

// setEdges makes the buffers of the node's incoming edges in g: buffers of
// edges that still exist are kept (with what they hold); buffers of edges
// that are gone are closed and what they held is reported.
func (a *nodeActor) setEdges(g *graph.Graph) error {
	s, n := a.s, a.node
	names := namesOf(g)
	in := g.InEdges(n.ID)
	bufs := make([]edgeBuffer, 0, 1+len(in))
	if inbox := a.buffer(""); inbox != nil {
		bufs = append(bufs, edgeBuffer{b: inbox})
	} else {
		bufs = append(bufs, edgeBuffer{b: edges.NewQueue[*pb.Envelope]()})
	}
	for _, e := range in {
		id := names.edgeID(e)
		spec := deliverySpec(e)
		var old edgeBuffer
		for _, eb := range a.bufs {
			if eb.id == id {
				old = eb
				break
			}
		}
		if old.b != nil && old.spec == spec {
			bufs = append(bufs, old)
			continue
		}
		b, err := edges.NewFor[*pb.Envelope](e, s.clk, func() { s.wake(n.ID, &drain{}) })
		if err != nil {
			return fmt.Errorf("edge %s -> %s: %w", e.From, e.To, err)
		}
		if old.b != nil {
			// A live edit changed the edge's delivery: what the old buffer
			// holds goes into the new one, under the new mode.
			before := old.b.Pending()
			old.b.Close()
			for _, env := range before {
				b.Push(env)
			}
			a.discard(supersededBy(before, b.Pending()), "superseded under the edge's new delivery mode (live edit)")
		}
		bufs = append(bufs, edgeBuffer{id: id, spec: spec, b: b})
	}
	for _, eb := range a.bufs {
		kept := false
		for _, nb := range bufs {
			if nb.id == eb.id {
				kept = true
				break
			}
		}
		if !kept {
			a.discard(eb.b.Pending(), "its edge "+eb.id+" was removed by a live edit")
			eb.b.Close()
		}
	}
	a.bufs = bufs
	return nil
}

// discard consumes envelopes that can no longer be delivered, on record.
func (a *nodeActor) discard(envs []*pb.Envelope, why string) {
	if len(envs) == 0 {
		return
	}
	ids := make([]string, len(envs))
	for i, e := range envs {
		ids[i] = e.GetId()
	}
	a.s.ctxs.drop(envs)
	a.s.Emit(&pb.Event{Kind: "envelope.dropped", Node: a.node.ID, Message: strconv.Itoa(len(envs)) + " envelopes not delivered: " + why,
		Attrs: []*pb.KV{{Key: "envelopes", Value: strings.Join(ids, ",")}}})
	a.recordConsumed(&Commit{Node: a.node.ID, Consumed: ids, Reason: why,
		Seqs: a.seqsOf(ids), Floor: a.floor()})
}

// recordConsumed records a commit that consumes envelopes without a firing
// (refused, discarded, a steer held) and acknowledges them once it is
// recorded; then the commit's Terminal, if any, is reported. With an
// AsyncJournal (durable sessions) the record is written off the actor's
// goroutine, like a firing's, and the acknowledgement comes back as a
// committed message; the floor the commit carries was taken with the
// envelopes still held, so it never passes one not yet acknowledged.
// Another Journal is called in place (one that does no I/O here).
func (a *nodeActor) recordConsumed(c *Commit) {
	if aj, ok := a.s.cfg.Journal.(AsyncJournal); ok {
		if self := a.s.pidOf(a.node.ID); self != nil {
			a.inflight++
			aj.CommitAsync(a.s.ctx, c, func(err error) {
				if err != nil {
					a.s.log.Error("actors: journal", "node", c.Node, "err", err)
				}
				done := &committed{consumed: c.Consumed, published: err == nil, async: true}
				if err == nil {
					done.term = c.Terminal
				}
				a.s.root.Send(self, done)
			})
			return
		}
	}
	if err := a.s.cfg.Journal.Commit(a.s.ctx, c); err != nil {
		a.s.log.Error("actors: journal", "node", a.node.ID, "err", err)
		return
	}
	a.committedDone(&committed{consumed: c.Consumed, published: true, term: c.Terminal})
}

// supersededBy lists the envelopes of before that after no longer holds.
func supersededBy(before, after []*pb.Envelope) []*pb.Envelope {
	kept := make(map[*pb.Envelope]bool, len(after))
	for _, e := range after {
		kept[e] = true
	}
	var out []*pb.Envelope
	for _, e := range before {
		if !kept[e] {
			out = append(out, e)
		}
	}
	return out
}

// Receive never blocks: handlers run on goroutines owned by the System.
func (a *nodeActor) Receive(c actor.Context) {
	if a.self == nil {
		a.self = c.Self()
	}
	if a.tailed {
		a.tailed = a.mailbox.ageTail()
	}
	switch m := c.Message().(type) {
	case *delivery:
		// The session made progress; and whether the gate wants the
		// arrival now (else why it waits), in the same lock.
		wants, waiting := a.s.sched.Arrived(a.node.ID, m.edge)
		if m.ack != "" {
			if !a.track(m) {
				return
			}
			crash.Point("deliver")
		} else if m.handed {
			crash.Point("deliver")
		}
		if m.env.GetKind() == KindSteer {
			a.holdSteer(m)
			return
		}
		if a.joinBranch(m.env) {
			a.tryFire(c)
			return
		}
		b := a.buffer(m.edge)
		if b == nil {
			b = a.bufs[0].b // the inbox
		}
		var held []*pb.Envelope
		if _, queue := b.(*edges.QueueBuffer[*pb.Envelope]); !queue {
			// What it may supersede (a queue supersedes nothing: copying
			// its backlog at every arrival made ingest quadratic).
			held = b.Pending()
		}
		if before := b.Dropped(); true {
			b.Push(m.env)
			if b.Len() == 0 && len(b.Pending()) > 0 {
				crash.Point("debounce-held") // held for a quiet window
			}
			if d := b.Dropped(); d > before {
				if m.ack != "" || m.handed {
					// The superseded envelopes are consumed: on record, then
					// acknowledged.
					a.discard(supersededBy(held, b.Pending()), "superseded by a newer envelope (delivery mode)")
				} else {
					a.s.ctxs.drop(supersededBy(held, b.Pending()))
					a.s.Emit(&pb.Event{Kind: "envelope.dropped", Node: a.node.ID, EdgeId: m.edge,
						Message: "superseded by a newer envelope (delivery mode)", Attrs: []*pb.KV{{Key: "dropped_total", Value: strconv.FormatUint(d, 10)}}})
				}
			}
		}
		if a.halted {
			a.refuseHeld() // stopped for good: refused as it comes
			return
		}
		if !wants && waiting != "" {
			a.gateWaiting(m.edge, waiting)
		}
		a.take()
		a.tryFire(c)
	case *drain:
		a.take()
		a.tryFire(c)
	case *trigger:
		a.pullAll()
		d, err := a.s.sched.Trigger(a.node.ID)
		if err == nil {
			if d.Fire && m.env != nil && len(d.Inputs) > 0 {
				// The trigger's message joins what the gate held.
				d.Inputs = append(d.Inputs, scheduler.Input{Item: m.env})
			}
			a.decided(d, m.env)
		}
		a.tryFire(c)
	case *heldQuery:
		c.Respond(a.buffered())
	case *quiesceQuery:
		c.Respond(a.idleForHandover())
	case *notice:
		a.onNotice(m.kind)
		a.take()
		a.tryFire(c)
	case *runDone:
		a.done(c, m)
	case *committed:
		if m.async {
			a.inflight--
		} else {
			a.running = false
		}
		a.committedDone(m)
		a.afterFiring(c)
	case *settled:
		a.inflight -= len(m.done)
		for i := range m.done {
			a.committedDone(&m.done[i])
			if j := m.done[i].job; j != nil {
				m.done[i].job = nil
				releaseJob(j)
			}
		}
		a.afterFiring(c)
	case *reconfigure:
		a.reconfigured(m)
		a.take()
		a.tryFire(c)
	case *retire:
		a.retired(c, m)
	case *bufferQuery:
		m.reply <- a.bufferStats()
	case *actor.Stopping:
		a.closeBuffers()
	case *actor.Stopped:
		// The last message: the goroutines end once it returns.
		a.stopPinned()
	}
}

// closeBuffers closes the node's delivery buffers (their timers stop).
func (a *nodeActor) closeBuffers() {
	for _, eb := range a.bufs {
		eb.b.Close()
	}
}

// stopIdle stops the actor at the System's Stop without a message when its
// mailbox is idle (nothing running, nothing waiting): the mailbox is
// claimed for good, so no Receive runs again, and what Stopping and
// Stopped do is done here. Poisoning every actor in turn and waiting for
// it cost a wake-up and a reply per node — 5 to 14 ms of a 1,000-node
// pipeline's Run, a tenth of it. It reports whether it stopped the actor
// (else the actor is poisoned as usual).
func (a *nodeActor) stopIdle() bool {
	if !a.mailbox.claimIdle() {
		return false
	}
	a.closeBuffers()
	a.stopPinned()
	return true
}

// done applies a firing's outcome (runDone) and lets the node go on: on
// the actor goroutine, or on the runner's with the mailbox claimed
// (runHanded; c is nil then).
func (a *nodeActor) done(c actor.Context, m *runDone) {
	a.cancel.cancel()
	a.cancel = firingCancel{}
	if a.finish(m) {
		return // running until the firing's I/O reports back
	}
	a.running = false
	a.afterFiring(c)
}

// afterFiring lets the node go on once a firing is over.
func (a *nodeActor) afterFiring(c actor.Context) {
	a.s.quiesce.poke()
	if a.retiring {
		a.retired(c, nil)
		return
	}
	a.take()
	a.tryFire(c)
}

// joinBranch joins parallel branch tokens at their fan-in node; it reports
// whether the envelope was such a token.
func (a *nodeActor) joinBranch(env *pb.Envelope) bool {
	bs := env.GetBranches()
	if !a.joinsHere(bs) {
		return false
	}
	top := bs[len(bs)-1]
	a.s.branchArrived(top)
	if a.joins == nil {
		a.joins = map[string][]*pb.Envelope{}
	}
	arrived := append(a.joins[top.GetForkId()], env)
	if uint32(len(arrived)) < top.GetWidth() {
		a.joins[top.GetForkId()] = arrived
		crash.Point("join-wait")
		a.s.Emit(&pb.Event{Kind: "node.waiting", Node: a.node.ID,
			Message: "join incomplete: " + strconv.Itoa(len(arrived)) + " of " + strconv.FormatUint(uint64(top.GetWidth()), 10) + " branches arrived"})
		return true
	}
	delete(a.joins, top.GetForkId())
	a.queue = append(a.queue, arrived)
	return true
}

// joinsHere reports whether a token with branch stack bs is one of the
// branches this fan-in node joins.
func (a *nodeActor) joinsHere(bs []*pb.Branch) bool {
	return a.typ == graph.TypeFanIn && len(bs) > 0 && bs[len(bs)-1].GetJoinNode() == a.node.ID
}

// resolveHead resolves the context of the batch at the head of the queue,
// once: a batch whose context cannot be resolved is refused (ErrContext),
// and the next one tried. It reports whether the head has its context.
func (a *nodeActor) resolveHead() bool {
	for !a.hasHead && len(a.queue) > 0 {
		batch := a.queue[0]
		// The contexts of the other envelopes of the batch (a join's) are
		// not used: the firing continues the first one's.
		a.s.ctxs.drop(batch[1:])
		if a.joinsHere(batch[0].GetBranches()) {
			// A fan-in continues from the fork's context (Branch.base).
			a.s.ctxs.drop(batch[:1])
			a.head, a.hasHead = tokenContext{}, true
			break
		}
		tc, err := a.s.resolveContext(batch[0])
		if err == nil {
			a.head, a.hasHead = tc, true
			break
		}
		a.popQueue()
		a.refuse(batch, err.Error(), err)
		if len(a.queue) == 0 {
			a.take()
		}
	}
	return a.hasHead
}

// dropHead forgets the resolved context of the queue's head.
func (a *nodeActor) dropHead() { a.head, a.hasHead = tokenContext{}, false }

// popQueue removes the batch at the head of the queue. A small array is
// kept when the queue empties: a node that fires one batch at a time
// appends the next to it instead of to a new one (a large one, from a
// backlog, is let go: an idle node holds little).
func (a *nodeActor) popQueue() {
	a.queue[0] = nil
	switch {
	case len(a.queue) > 1:
		a.queue = a.queue[1:]
	case cap(a.queue) <= 4:
		a.queue = a.queue[:0]
	default:
		a.queue = nil
	}
}

// take pulls from the delivery buffers what the node's gate wants now.
// While the node is busy nothing is pulled: arrivals wait in their buffers,
// where the edge's delivery mode applies (latest keeps the newest).
func (a *nodeActor) take() {
	for !a.running && len(a.queue) == 0 {
		pulled := false
		for _, eb := range a.bufs {
			if eb.b.Len() == 0 || !a.s.sched.Wants(a.node.ID, eb.id) {
				continue // nothing ready (a busy node's inbox is mostly empty), or not wanted now
			}
			env, ok := eb.b.Pop()
			if !ok {
				continue
			}
			pulled = true
			a.offer(eb.id, env)
			if len(a.queue) > 0 {
				return
			}
		}
		if !pulled {
			return
		}
	}
}

// gateWaiting emits gate.waiting when the gate starts waiting, or when what
// it waits for changed since it last said (a join missing other edges, the
// next cron time): a join whose other edges keep delivering, or a manual
// gate whose buffer fills, waits for the same thing at every arrival.
func (a *nodeActor) gateWaiting(edge, why string) {
	if why == a.gateSaid {
		return
	}
	a.gateSaid = why
	a.s.Emit(&pb.Event{Kind: "gate.waiting", Node: a.node.ID, EdgeId: edge, Message: why})
}

// pullAll hands the gate everything the buffers hold (before a manual
// trigger or a scheduled tick fires the node with it).
func (a *nodeActor) pullAll() {
	for _, eb := range a.bufs {
		for {
			env, ok := eb.b.Pop()
			if !ok {
				break
			}
			a.offer(eb.id, env)
		}
	}
}

func (a *nodeActor) offer(edge string, env *pb.Envelope) {
	d, err := a.s.sched.Offer(a.node.ID, edge, env)
	if errors.Is(err, scheduler.ErrUnknownNode) {
		// A live edit removed the node since its gate wanted the envelope
		// (its retire message is on its way): dropped on record, as what
		// its buffers hold will be.
		a.discard([]*pb.Envelope{env}, "node "+a.node.ID+" was removed by a live edit")
		return
	}
	if err != nil {
		a.s.log.Error("actors: offer", "node", a.node.ID, "err", err)
		return
	}
	a.decided(d, nil)
}

// decided queues a gate's firing, or records why the node waits.
func (a *nodeActor) decided(d scheduler.Decision, tick *pb.Envelope) {
	if !d.Fire {
		if d.Reason != "" {
			a.gateWaiting("", d.Reason)
		}
		return
	}
	a.gateSaid = "" // the waiting period is over
	batch := make([]*pb.Envelope, 0, len(d.Inputs))
	for _, in := range d.Inputs {
		batch = append(batch, in.Item.(*pb.Envelope))
	}
	if len(batch) == 0 {
		if tick == nil {
			// A schedule node's tick is named after the time it stands
			// for (the same id however late it fires); a trigger's after
			// now.
			at := d.Scheduled
			if at.IsZero() {
				at = a.s.clk.Now()
			}
			tick = &pb.Envelope{Kind: KindTick, SessionId: a.s.cfg.SessionID, ToNode: a.node.ID,
				Id:        a.s.cfg.SessionID + "." + a.node.ID + ".tick." + strconv.FormatInt(at.UnixNano(), 10),
				CreatedAt: timestamppb.New(a.s.clk.Now())}
		}
		batch = append(batch, tick)
	}
	if !d.Scheduled.IsZero() {
		a.scheduled(d, batch)
	}
	if len(d.Missing) > 0 {
		// The firing's outcome says which inputs were missing.
		for i, env := range batch {
			env = proto.CloneOf(env) // a handed envelope is the journal's too (handOver)
			env.Context = append(env.Context, &pb.KV{Key: "join.missing", Value: strings.Join(d.Missing, ",")})
			batch[i] = env
		}
	}
	a.queue = append(a.queue, batch)
}

// scheduled marks a schedule node's firing with the cron time it stands
// for: the context keys schedule.time and schedule.late (true for a
// missed time fired at a resume or takeover, which a cron.late event
// announces) on its envelopes.
func (a *nodeActor) scheduled(d scheduler.Decision, batch []*pb.Envelope) {
	at := d.Scheduled.UTC().Format(time.RFC3339)
	for i, env := range batch {
		env = proto.CloneOf(env) // a handed envelope is the journal's too (handOver)
		env.Context = append(env.Context, &pb.KV{Key: "schedule.time", Value: at},
			&pb.KV{Key: "schedule.late", Value: strconv.FormatBool(d.Late)})
		batch[i] = env
	}
	if d.Late {
		missed := strconv.Itoa(d.Missed)
		if d.Missed < 0 {
			missed = "many"
		}
		a.s.Emit(&pb.Event{Kind: "cron.late", Node: a.node.ID,
			Message: "fires late for the scheduled time " + at + " (missed while the session had no owner)",
			Attrs:   []*pb.KV{{Key: "scheduled", Value: at}, {Key: "late", Value: "true"}, {Key: "missed", Value: missed}}})
	}
}

func (a *nodeActor) onNotice(kind string) {
	switch kind {
	case "timer":
		if !a.s.sched.Wants(a.node.ID, "") {
			// A gate that wants nothing between firings (schedule) takes
			// at its tick what arrived since the last one.
			a.pullAll()
		}
		d, err := a.s.sched.Timer(a.node.ID)
		if err == nil {
			a.decided(d, nil)
		}
	case "cancel":
		a.cancel.cancel()
	case "admit":
		// tryFire asks again
	case "stopped":
		a.refuseHeld()
	}
}

// refuseHeld refuses, once the scheduler stopped the node for good (a
// budget spent, an iteration cap, a stall), every envelope it holds: the
// batches queued, what its gate holds (a join's arrivals, a manual gate's)
// and what waits in its buffers — on record and acknowledged, with the
// stop's reason, at the moment of the stop rather than at a trigger or
// wake-up that may never come. Arrivals after that are refused as they
// come (halted).
func (a *nodeActor) refuseHeld() {
	held, reason, cause, stopped := a.s.sched.TakeHeld(a.node.ID)
	if !stopped {
		return
	}
	a.halted = true
	for len(a.queue) > 0 {
		batch := a.queue[0]
		a.queue = a.queue[1:]
		a.dropHead()
		a.refuse(batch, reason, cause)
	}
	rest := make([]*pb.Envelope, 0, len(held))
	for _, in := range held {
		rest = append(rest, in.Item.(*pb.Envelope))
	}
	for _, eb := range a.bufs {
		for {
			env, ok := eb.b.Pop()
			if !ok {
				break
			}
			rest = append(rest, env)
		}
	}
	if len(rest) > 0 {
		a.refuse(rest, reason, cause)
	}
}

// maxInflight bounds how far a node runs ahead of its journal: the
// firings (and refusals) whose records it handed to the journal and that
// were not reported stored yet (inflight). Each holds its job, its inputs
// and its outputs (published once the record is stored), and a durable
// ingest ran up to 17,835 firings ahead of a busy journal; a slow store
// (a cluster's round trips, a disk that stalls) would have let a node
// hold every input the consumer lets it have (Config.MaxHeld) that way.
// Past the bound the node fires again once records come back; the
// journal's batches stay large (a batch took ~800 records in that
// ingest), and the ingest measured the same with bounds of 256 to 2,048
// (64 was slower).
var maxInflight atomic.Int64

const defaultMaxInflight = 1024

func init() { maxInflight.Store(defaultMaxInflight) }

// SetMaxInflight sets maxInflight (n ≤ 0: the default) for a test; it
// returns what restores it.
func SetMaxInflight(n int) (restore func()) {
	if n <= 0 {
		n = defaultMaxInflight
	}
	old := maxInflight.Swap(int64(n))
	return func() { maxInflight.Store(old) }
}

// tryFire starts the handler on the next ready batch if the node is idle,
// not maxInflight firings ahead of its journal, and the scheduler admits
// it.
func (a *nodeActor) tryFire(c actor.Context) {
	if a.running || a.retiring || len(a.queue) == 0 || a.inflight >= int(maxInflight.Load()) || a.s.stoppedNow() || a.s.quiesce.on.Load() {
		return // (past maxInflight: the next committed or settled report tries again)
	}
	if !a.resolveHead() {
		return
	}
	batch := a.queue[0]
	if why := a.s.branches.acquire(a.s.graph(), a.node.ID, batch[0].GetBranches()); why != "" {
		if why != a.waiting {
			a.s.Emit(&pb.Event{Kind: "gate.waiting", Node: a.node.ID, Message: why})
		}
		a.waiting = why // an "admit" notice will try again
		return
	}
	room := newJob() // the firing's, if admitted: its ticket is made there
	t, w, evs := a.s.sched.AdmitIn(a.node.ID, &room.admitted)
	if t == nil {
		releaseJob(room)
	}
	a.s.emitScheduler(evs)
	if w != nil && errors.Is(w.Err, scheduler.ErrUnknownNode) {
		// A live edit removed the node since the batch was queued: not a
		// refusal — the retire message on its way drops the queue on
		// record with the rest of what the node holds.
		return
	}
	if w != nil {
		if w.Stop {
			// The node will not run again: everything it holds, queued or
			// still in its buffers, is refused (and acknowledged) now.
			for len(a.queue) > 0 {
				batch = a.queue[0]
				a.popQueue()
				a.dropHead()
				a.refuse(batch, w.Reason, w.Err)
				if len(a.queue) == 0 {
					a.take()
				}
			}
			a.refuseHeld()
			return
		}
		a.waiting = w.Reason // an "admit" notice will try again
		return
	}
	if t == nil {
		return // neither a ticket nor a wait: nothing runs (room is given back)
	}
	a.waiting = ""
	a.popQueue()
	tc := a.head
	a.dropHead()
	a.ticket = t
	a.firing++
	a.running = true
	firing := a.firing
	self := a.self
	job := a.prepare(room, batch, firing, tc)
	job.ticket = t
	if !a.inline {
		st := a.s.steers.take()
		for _, env := range st {
			job.in.Messages = append(job.in.Messages, toMessage(env))
		}
	}
	a.cur = job
	base := a.s.ctx
	if len(job.caller) > 0 {
		base = nodes.WithCaller(base, CallerOf(job.caller))
	}
	fc := newFiringCtx(base)
	var ctx context.Context = fc
	a.cancel = firingCancel{fc: fc}
	if !t.Deadline.IsZero() {
		ctx, a.cancel.stop = clock.WithDeadlineCause(ctx, a.s.clk, t.Deadline, errTimeBudget)
	}
	if a.s.Wanted("node.started") {
		a.s.EmitWanted(a.startedEvent(firing, job.caller))
	}
	if a.inline {
		// A handler that never blocks runs here; its result is the next
		// message of this mailbox.
		res := a.run(ctx, job)
		crash.Point("handler-done")
		job.done = runDone{firing: firing, res: res}
		a.s.root.Send(self, &job.done)
		return
	}
	// The handler runs on the runner, from this goroutine once the mailbox
	// runs dry (pinned.handOff), and reports back to the mailbox, which
	// the same goroutine then runs when it is idle (pinned.claim): a hop
	// wakes no goroutine of the node's while nothing else arrives.
	job.runCtx, job.self = ctx, self
	a.handed = job
	if a.runFn == nil {
		a.runFn = a.runHanded
	}
	if !a.s.handOff(&a.mailbox, &a.runner, a.runFn) {
		a.handed = nil
		a.running = false
		a.cancel.cancel()
		return
	}
	a.tailed = true
}

// runHanded runs the firing tryFire handed to the runner (a.handed: the
// node has one firing at a time, and the next is handed only once this
// one's runDone came back), then reports it to the mailbox.
func (a *nodeActor) runHanded() {
	defer a.s.wg.Done()
	job := a.handed
	a.handed = nil // the job is not kept past its firing
	res := a.run(job.runCtx, job)
	crash.Point("handler-done")
	job.done = runDone{firing: job.firing, res: res}
	if a.runner.Load().claim(&a.mailbox) && a.s.cfg.JetStream == nil && !a.retiring {
		// The mailbox is this goroutine's (nothing runs Receive until it
		// gives it back, and nothing waited there): a session that is not
		// durable applies the outcome here, as Receive would have done
		// with the runDone first in its mailbox, without a message through
		// protoactor's mailbox. A durable one's I/O goes through the
		// journal (finish), as a message.
		a.done(nil, &job.done)
		return
	}
	a.s.root.Send(job.self, &job.done)
}

// refuse consumes a batch the scheduler will never run: in a pipeline the
// run fails with the reason; in a session the envelopes are consumed with
// the refusal on record (an event, never a silent drop).
func (a *nodeActor) refuse(batch []*pb.Envelope, reason string, cause error) {
	ids := make([]string, len(batch))
	for i, e := range batch {
		ids[i] = e.GetId()
	}
	a.s.Emit(&pb.Event{Kind: "node.refused", Node: a.node.ID, Message: reason,
		Attrs: []*pb.KV{{Key: "envelopes", Value: strings.Join(ids, ",")}}})
	var t *Terminal
	if !a.s.isSession() {
		t = &Terminal{Status: "fail", Reason: reason, Final: true, Cause: cause}
	}
	a.s.ctxs.drop(batch)
	a.recordConsumed(&Commit{Node: a.node.ID, Firing: a.firing, Consumed: ids, Terminal: t, Reason: reason,
		Seqs: a.seqsOf(ids), Floor: a.floor()})
}

// job is everything a handler run needs, built on the actor goroutine.
// It is 1,256 bytes: with the heap's 8-byte header of an object over 512
// bytes, the 1,280-byte size class — three words more take every firing
// to the 1,408-byte one.
type job struct {
	batch    []*pb.Envelope
	firing   uint64
	ctx      map[string]string // the token's context before the handler
	branches []*pb.Branch      // the token's branch stack after this node's join
	in       nodes.Input

	// tc is the context the firing started from (tc.m is ctx), changed
	// the keys set in ctx since, and delta what the firing's envelopes
	// carry over their base (made once).
	tc      tokenContext
	changed []string
	delta   []*pb.KV

	node *graph.Node   // the node as it was when the firing started (live edits)
	h    nodes.Handler // its handler then

	artifacts []*pb.Artifact // what the firing produced, stored

	meta   map[string]string // the input's metadata, merged
	metaKV []*pb.KV          // what the firing's envelopes carry (meta + the outcome's)
	caller []*pb.KV          // whose work this is (Envelope.caller)

	ticket *scheduler.Ticket // the scheduler's admission of this firing (&admitted)
	// admitted is the room ticket is made in (scheduler.AdmitIn).
	admitted scheduler.Ticket
	charged  nodes.Usage // usage already charged during the run

	// Room for what most firings need, in the job's own allocation: the
	// message of a batch of one and the keys a firing usually sets.
	msg1      [1]nodes.Message
	changed8  [8]string
	consumed1 [1]string
	produced1 [1]*pb.Envelope
	// commit is the firing's record (finish).
	commit Commit
	// attemptIn is the input of the attempt running, res its result
	// (run.go), done its report to the actor.
	attemptIn nodes.Input
	res       runResult
	done      runDone
	// runCtx and self: the handler's context and the node's actor, for the
	// runner (runHanded) and the io goroutine (settle).
	runCtx context.Context
	self   *actor.PID

	// What a durable firing takes from its commit to its settling, in the
	// job rather than in a closure per firing: its node, its outcome,
	// event and outputs, and the first envelope's stream sequence.
	a        *nodeActor
	o        *nodes.Outcome
	attempts int
	ev       *pb.Event
	hops     []hop
	seqs1    [1]uint64
	// meter is the firing's Input.OnUsage (usage), made per firing;
	// settleFn (the journal's done) is made once per job and kept when it
	// is reused: it names the job itself.
	meter    *meter
	onUsage  func(nodes.Usage)
	settleFn func(error)
}

// meter charges the usage a handler reports while its firing runs
// (Input.OnUsage) to the firing's ticket, and nothing once the firing's
// outcome was taken (finish: the outcome's usage is the firing's whole;
// what was not charged yet is charged then). Jobs are pooled: a handler,
// or a goroutine of its, that kept its Input and reported later would
// otherwise have charged whichever firing reused the job — perhaps
// another session's.
type meter struct {
	mu sync.Mutex
	j  *job // nil once the firing's outcome was taken
}

// charge is the firing's Input.OnUsage.
func (m *meter) charge(u nodes.Usage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j := m.j
	if j == nil {
		return // the firing is over: its outcome's usage counts
	}
	j.charged = j.charged.Add(u)
	s := j.a.s
	s.emitScheduler(s.sched.Charge(j.ticket, scheduler.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, Cost: u.Cost}))
}

// end takes what the firing's handler charged while it ran, and stops
// charging (on the node's actor, at finish).
func (j *job) endMeter() nodes.Usage {
	m := j.meter
	if m == nil {
		return j.charged
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.j = nil
	return j.charged
}

// jobs are firings' jobs settled, for the next firings (releaseJob): a
// job is about 1.3 KB, a tenth of what a durable queue ingest allocated
// per event.
var jobs = sync.Pool{New: func() any { return new(job) }}

// newJob is a zero job, perhaps one released.
func newJob() *job { return jobs.Get().(*job) }

// releaseJob gives a job back once nothing refers to it any more: a
// firing's that is not durable, once it completed in place (finish); a
// durable firing's, on the node's actor, once its settling was taken
// (committedDone): its handler returned (a handler does not retain its
// Input), the actor let it go (cur, handed), its record was stored and
// told (the journal keeps nothing of a commit once done is called with
// nil: AsyncJournal), and the io goroutine reported it (settled). A
// firing whose record could not be stored is not released: the journal
// may write its record again.
func releaseJob(j *job) {
	j.endMeter()
	sf := j.settleFn
	*j = job{}
	j.settleFn = sf
	jobs.Put(j)
}

// usage is the Input.OnUsage of the firing's attempts (its meter).
func (j *job) usage() func(nodes.Usage) {
	if j.meter == nil {
		j.meter = &meter{j: j}
		j.onUsage = j.meter.charge
	}
	return j.onUsage
}

// prepare builds the firing of batch in j (a zero job but for its
// ticket) from tc, its first envelope's resolved context (resolveHead).
func (a *nodeActor) prepare(j *job, batch []*pb.Envelope, firing uint64, tc tokenContext) *job {
	g := a.s.graph()
	first := batch[0]
	j.batch, j.firing, j.node, j.h, j.a = batch, firing, a.node, a.h, a
	bs := first.GetBranches()
	if a.joinsHere(bs) {
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
		j.tc, j.ctx = tc, tc.m
		if a.s.cfg.WholeContexts {
			j.tc.base = "" // its envelopes name no base
		}
		j.branches = cloneBranches(bs)
	}
	j.ctx["current_node"] = a.node.ID
	j.changed = append(j.changed8[:0], "current_node")
	a.s.threads.fill(j.ctx, &j.changed)
	var msgs []nodes.Message
	if len(batch) <= len(j.msg1) {
		msgs = j.msg1[:len(batch)]
	} else {
		msgs = make([]nodes.Message, len(batch))
	}
	for i, env := range batch {
		msgs[i] = toMessage(env)
	}
	j.meta = mergeMetadata(batch)
	for _, env := range batch {
		if len(env.GetCaller()) > 0 {
			j.caller = env.GetCaller()
			break
		}
	}
	gen := 0
	if g := j.ctx["internal.run_generation"]; g != "" {
		gen, _ = strconv.Atoi(g)
	}
	logs := a.s.cfg.LogsDir
	if gen > 0 && logs != "" {
		logs = filepath.Join(logs, "restart-"+strconv.Itoa(gen))
	}
	stage := ""
	if logs != "" {
		stage = filepath.Join(logs, a.node.ID)
	}
	prompt := a.node.Prompt()
	if a.emitFn == nil {
		a.emitFn = a.emitter() // on the first firing: an idle node holds none
	}
	j.in = nodes.Input{
		Emit:      a.emitFn,
		SessionID: a.s.cfg.SessionID,
		Graph:     g,
		Node:      a.node,
		Type:      a.typ,
		Context:   j.ctx,
		Messages:  msgs,
		Prompt:    prompt,
		LogsDir:   logs,
		StageDir:  stage,
		WorkDir:   a.s.cfg.WorkDir,
		Metadata:  j.meta,
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
func (a *nodeActor) envelope(j *job, to, edgeID string, o *nodes.Outcome, ctx []*pb.KV, base string, version uint64, bs []*pb.Branch) *pb.Envelope {
	target := edgeID
	if target == "" {
		target = "jump." + to
	}
	blk := &envelopeBlock{}
	now := a.s.clk.Now()
	blk.ts.Seconds, blk.ts.Nanos = now.Unix(), int32(now.Nanosecond())
	blk.pl.Message = o.Response
	blk.oc.Status, blk.oc.PreferredLabel, blk.oc.SuggestedNextIds, blk.oc.Notes, blk.oc.FailureReason =
		string(o.Status), o.PreferredLabel, o.SuggestedNextIDs, o.Notes, o.FailureReason
	env := &blk.env
	env.Id = a.s.envelopeID(a.node.ID, j.firing, target)
	env.SessionId = a.s.cfg.SessionID
	env.Kind = KindHandoff
	env.FromNode = a.node.ID
	env.ToNode = to
	env.EdgeId = edgeID
	env.Iteration = j.firing
	env.CreatedAt = &blk.ts
	env.Payload = &blk.pl
	env.Outcome = &blk.oc
	env.ContextUpdates = kvList(o.ContextUpdates)
	env.Context = ctx
	env.ContextBase = base
	env.ContextVersion = version
	env.Branches = bs
	env.Root = rootOf(j.batch[0])
	env.Metadata = j.metadata(o)
	env.Caller = j.caller
	if len(j.artifacts) > 0 {
		env.Payload.Artifacts = j.artifacts
	}
	if u := o.Usage; u.InputTokens != 0 || u.OutputTokens != 0 || u.Cost != 0 {
		env.Usage = &pb.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, Cost: u.Cost}
	}
	return env
}

// rootOf is the id of the envelope env's chain of firings started from
// (Envelope.root): its root, or its own id when it has none — an outside
// envelope, a tick, an input the runtime made.
func rootOf(env *pb.Envelope) string {
	if r := env.GetRoot(); r != "" {
		return r
	}
	return env.GetId()
}

// envelopeBlock is an envelope a firing sends with its payload, outcome
// and time, in one allocation (they were four).
type envelopeBlock struct {
	env pb.Envelope
	pl  pb.Payload
	oc  pb.Outcome
	ts  timestamppb.Timestamp
}

// metadata is what the firing's envelopes carry: the input's metadata with
// the outcome's over it, converted once per firing.
func (j *job) metadata(o *nodes.Outcome) []*pb.KV {
	if j.metaKV != nil || (len(j.meta) == 0 && len(o.Metadata) == 0) {
		return j.metaKV
	}
	m := make(map[string]string, len(j.meta)+len(o.Metadata))
	for k, v := range j.meta {
		m[k] = v
	}
	for k, v := range o.Metadata {
		m[k] = v
	}
	j.metaKV = kvList(m)
	return j.metaKV
}

func durationMS(d time.Duration) int64 { return d.Milliseconds() }

// deliverySpec is what an edge's buffer depends on: its delivery mode and
// debounce window.
func deliverySpec(e *graph.Edge) string {
	return e.Attrs.String("delivery") + "|" + e.Attrs.String("debounce")
}
