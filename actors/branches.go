package actors

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/switchyard/switchyard/graph"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// defaultMaxParallel is max_parallel when a parallel node does not set it
// (the Attractor spec's default).
const defaultMaxParallel = 4

// branchSlots enforces max_parallel: at most that many branches of one
// fork run at once. A branch takes a slot when its first firing starts
// and gives it back when its token reaches the fan-in node; the firings of
// a branch without a slot wait (its envelopes stay queued) and are woken
// when a slot frees. Slots are kept in memory: after a resume the branches
// in progress take theirs again as they fire.
type branchSlots struct {
	mu    sync.Mutex
	forks map[string]*forkSlots // by fork id
}

type forkSlots struct {
	limit   int
	active  map[string]bool // branches holding a slot
	done    map[string]bool // branches that reached the join
	waiting map[string]bool // nodes to wake when a slot frees
}

// maxParallel is the branch limit of the parallel node fork.
func maxParallel(g *graph.Graph, fork string) int {
	if n := g.Node(fork); n != nil {
		if v, ok := n.Attrs.Int("max_parallel"); ok && v >= 1 {
			return v
		}
	}
	return defaultMaxParallel
}

// acquire lets node fire with a token on bs: every branch the token is on
// (the levels whose join is not node itself) must hold a slot of its fork
// or get one. It returns "" when the firing may start, else why it waits.
func (b *branchSlots) acquire(g *graph.Graph, node string, bs []*pb.Branch) string {
	if len(bs) == 0 {
		return ""
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, br := range bs {
		if br.GetJoinNode() == node || br.GetWidth() <= 1 {
			continue
		}
		f := b.fork(g, br)
		if f.active[br.GetBranch()] || f.done[br.GetBranch()] {
			continue
		}
		if len(f.active) >= f.limit {
			f.waiting[node] = true
			return "max_parallel=" + strconv.Itoa(f.limit) + ": branch " + br.GetBranch() + " of " + br.GetForkNode() +
				" waits until one of the " + strconv.Itoa(len(f.active)) + " running branches reaches the join"
		}
	}
	for _, br := range bs {
		if br.GetJoinNode() == node || br.GetWidth() <= 1 {
			continue
		}
		if f := b.fork(g, br); !f.done[br.GetBranch()] {
			f.active[br.GetBranch()] = true
		}
	}
	return ""
}

func (b *branchSlots) fork(g *graph.Graph, br *pb.Branch) *forkSlots {
	if b.forks == nil {
		b.forks = map[string]*forkSlots{}
	}
	f := b.forks[br.GetForkId()]
	if f == nil {
		f = &forkSlots{limit: maxParallel(g, br.GetForkNode()), active: map[string]bool{}, done: map[string]bool{}, waiting: map[string]bool{}}
		b.forks[br.GetForkId()] = f
	}
	return f
}

// release gives back the slot of a branch whose token reached the join and
// returns the nodes to wake. A fork whose branches all arrived is
// forgotten.
func (b *branchSlots) release(br *pb.Branch) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	f := b.forks[br.GetForkId()]
	if f == nil {
		return nil
	}
	delete(f.active, br.GetBranch())
	f.done[br.GetBranch()] = true
	if uint32(len(f.done)) >= br.GetWidth() {
		delete(b.forks, br.GetForkId())
	}
	if len(f.waiting) == 0 {
		return nil
	}
	wake := make([]string, 0, len(f.waiting))
	for n := range f.waiting {
		wake = append(wake, n)
	}
	f.waiting = map[string]bool{}
	return wake
}

// branchArrived is called by a fan-in node when a branch token reaches it.
func (s *System) branchArrived(br *pb.Branch) {
	for _, n := range s.branches.release(br) {
		s.wake(n, &notice{kind: "admit"})
	}
}

// steerBox holds steering messages (envelopes of kind steer, as a
// stack.manager_loop sends its child) until the session's next firing of a
// node that does work: a pipeline has one token, so that is the node the
// run reaches next (or the one it is at, when it fires again).
// held says msgs may hold something: every firing asks, and almost always
// finds nothing, without the lock.
type steerBox struct {
	mu   sync.Mutex
	msgs []*pb.Envelope
	held atomic.Bool
}

func (b *steerBox) add(env *pb.Envelope) {
	b.mu.Lock()
	b.msgs = append(b.msgs, env)
	b.held.Store(true)
	b.mu.Unlock()
}

func (b *steerBox) take() []*pb.Envelope {
	if !b.held.Load() {
		return nil // a steer added meanwhile goes to the next firing
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.msgs
	b.msgs = nil
	b.held.Store(false)
	return out
}

// holdSteer takes a steering envelope off the node's input: it does not
// fire the node; it is consumed now (on record) and handed to the next
// firing of a node that does work.
func (a *nodeActor) holdSteer(m *delivery) {
	a.s.steers.add(m.env)
	a.s.Emit(&pb.Event{Kind: "steer.received", Node: a.node.ID, Message: m.env.GetPayload().GetMessage(),
		Attrs: []*pb.KV{{Key: "envelope", Value: m.env.GetId()}}})
	if m.ack == "" {
		return
	}
	ids := []string{m.env.GetId()}
	a.recordConsumed(&Commit{Node: a.node.ID, Consumed: ids, Reason: "steer: held for the next firing",
		Seqs: a.seqsOf(ids), Floor: a.floor()})
}
