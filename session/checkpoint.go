package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/switchyard/switchyard/actors"
	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/internal/minheap"
	"github.com/switchyard/switchyard/internal/warm"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/scheduler"
)

// Checkpoint is the state of a session after a node completes, as written
// to checkpoint.json in the run directory. The first fields are the spec's
// (appendix C, section 5.3); the rest let a resumed run neither lose nor
// repeat work.
type Checkpoint struct {
	Timestamp      time.Time         `json:"timestamp"`
	SessionID      string            `json:"session_id"`
	Graph          string            `json:"graph"`
	CurrentNode    string            `json:"current_node"`
	CompletedNodes []string          `json:"completed_nodes"`
	NodeRetries    map[string]int    `json:"node_retries"`
	Context        map[string]string `json:"context"`
	Logs           []string          `json:"logs"`
	// NodeOutcomes holds every node's last status (DESIGN decision 8).
	NodeOutcomes map[string]string `json:"node_outcomes"`
	// NodeVisits holds how many times each node fired.
	NodeVisits map[string]int `json:"node_visits"`
	// Pending are the envelopes published and not yet consumed, in protojson.
	Pending []json.RawMessage `json:"pending"`
	Firings uint64            `json:"firings"`
	Seq     uint64            `json:"seq"`
	// Status is running, success or fail.
	Status        string `json:"status"`
	FailureReason string `json:"failure_reason,omitempty"`
	// Scheduler holds iteration counts and budgets spent, so that a resume
	// does not reset them.
	Scheduler *scheduler.Snapshot `json:"scheduler,omitempty"`
	// Consumed lists, in a durable session, the envelopes consumed above
	// their node's acknowledgement floor: the ones JetStream may deliver
	// again after a crash, recognised by id and acknowledged without
	// reaching the node twice.
	Consumed []ConsumedEnvelope `json:"consumed,omitempty"`
	// Floors is each node's acknowledgement floor (durable sessions): every
	// envelope it received at or below that stream sequence was consumed.
	Floors map[string]uint64 `json:"floors,omitempty"`
	// NodeStatus is the outcome of the firing this checkpoint records.
	NodeStatus string `json:"node_status,omitempty"`
}

// ConsumedEnvelope is one consumed envelope a checkpoint remembers.
type ConsumedEnvelope struct {
	ID   string `json:"id"`
	Node string `json:"node"`
	Seq  uint64 `json:"seq"`
}

// ReadCheckpoint reads checkpoint.json from a run directory.
func ReadCheckpoint(dir string) (*Checkpoint, error) {
	data, err := os.ReadFile(filepath.Join(dir, "checkpoint.json"))
	if err != nil {
		return nil, fmt.Errorf("session: read checkpoint: %w", err)
	}
	cp := &Checkpoint{}
	if err := json.Unmarshal(data, cp); err != nil {
		return nil, fmt.Errorf("session: checkpoint %s: %w", filepath.Join(dir, "checkpoint.json"), err)
	}
	return cp, nil
}

// journal is the session's actors.Journal: it keeps the checkpoint state
// and writes it after every firing (durable: a record in the session's KV
// bucket before the firing's outputs leave; not durable: checkpoint.json in
// the background, the latest state one write at a time, and at the end).
type journal struct {
	dir   string
	clk   clock.Clock
	graph string
	sess  string
	keep  uint64 // how many records the journal keeps (JournalKeep, or the broker's)

	mu        sync.Mutex
	completed []string
	retries   map[string]int
	outcomes  map[string]string
	visits    map[string]int
	cur       *ctxVal           // the run context after the last firing (keepContext): noted by apply, made when a snapshot reads it
	ctxs      map[string]runCtx // the whole context of each pending envelope (runctx.go)
	current   string
	pending   map[string]*pb.Envelope
	order     []string // pending ids in publication order
	firings   uint64
	seq       uint64
	status    string
	reason    string
	failed    bool
	onSaved   func([]savedRecord) // told of the records a write stored, together
	schedSnap func() *scheduler.Snapshot
	// schedOf is the part of the scheduler's state a firing of a node
	// changes, for its journal record (scheduler.SnapshotOf).
	schedOf func(node string) *scheduler.Snapshot
	// schedCount is the same part when it is only counters
	// (scheduler.CountOf), tried before schedOf.
	schedCount func(node string) (scheduler.Count, bool)

	consumed    map[string]*consumedHeap // per node: consumed above its floor, lowest sequence first
	floors      map[string]uint64        // acknowledgement floor per node
	trimmed     map[string]uint64        // the floor up to which the work stream was purged, per node
	trimmedAll  uint64                   // the work stream was purged at or below this sequence, on every subject
	snapAt      uint64                   // the record of the last snapshot taken (or of the state restored)
	snapStored  uint64                   // the record of the last snapshot this process stored (guarded by wmu)
	inbound     func() []string          // the subjects the graph's nodes receive on now (actors.InboundSubjects)
	lastStatus  string                   // status of the last committed firing
	kv          *broker.SessionBucket
	js          jetstream.JetStream // to write a batch of records at once
	acks        recordAcks          // where the stored records' acknowledgements come back (guarded by wmu)
	goroutines  *warm.Pool          // where the writer runs: its broker's kept goroutines (nil: a goroutine of its own)
	batch       []pendingRecord     // records not written yet: queued for the writer, or held by a sparse policy
	spare       []pendingRecord     // a batch the writer wrote, emptied, for the next batch to fill (recycle)
	due         bool                // batch holds a record to write now (the writer takes it)
	linger      *time.Timer         // writes what a pure firing's record waits with (lingered)
	lingering   bool                // linger is armed
	lingerOff   bool                // flushed: linger writes nothing more
	writing     bool                // the writer goroutine runs
	wwg         sync.WaitGroup      // the writer goroutine
	holdWriter  chan struct{}       // a test's: the writer goroutine waits for it to close before it starts
	wmu         sync.Mutex          // writes of the bucket, and the fence (lock order: wmu, then mu)
	written     []writtenEntry      // the journal entries written since the last compaction (guarded by wmu)
	maintaining bool                // the upkeep goroutine runs (maintainLocked)
	owed        *owedUpkeep         // the last upkeep skipped while one ran (guarded by mu; flush does it)
	mwg         sync.WaitGroup      // the upkeep goroutine
	broken      error               // a record failed: nothing more is written
	fence       uint64              // the bucket's last sequence this owner knows (0: unfenced); in the shared bucket, its mark's (fenceOf)
	fenceHdr    nats.Header         // the header of the fence fenceHdrOf (sharedFence; guarded by wmu)
	fenceHdrOf  uint64
	sending     nats.Msg            // the message a window is published with (sendWindow; guarded by wmu)
	ackWait     clock.Timer         // bounds the wait for a window's acknowledgements (awaitWindow; guarded by wmu)
	last        uint64              // the stream sequence of this owner's last write stored
	token       string              // this owner's mark (ownerKey)
	offline     bool                // rebuilding a state from records
	at          time.Time           // when the last record was written (durable)
	sched       *scheduler.Snapshot // the scheduler's counters of the last record

	// The firings that store objects and have no record numbered yet, and
	// those that started storing since the last artifact sweep
	// (artifact_retention.go).
	making   map[firingKey]bool
	remade   map[firingKey]bool
	deleting map[firingKey]bool // firings whose objects a sweep deletes now (claimDelete)
	deleted  *sync.Cond         // on mu: a deletion ended

	policy    CheckpointPolicy
	cleanup   bool      // remove the checkpoint when the session succeeds
	unsaved   int       // firings since the last write
	lastWrite time.Time // when the checkpoint was last written

	// checkpoint.json of a session that is not durable is written in the
	// background (see fileWriter), off the firing path.
	fileDirty bool     // a commit was not written yet
	fileNodes []string // the nodes of the commits not written
	// fileTaken are the nodes of the write under way in the writer: the
	// session's final write, which may overtake it, reports them saved
	// itself, so that every checkpoint.saved comes before
	// session.completed.
	fileTaken  []string
	fileWake   chan struct{} // wakes the writer (nil until it starts)
	fileDone   chan struct{} // closed when the writer has returned
	fileClosed bool          // flush stopped the writer
	fileMu     sync.Mutex    // one write at a time (lock order: mu, then fileMu)
	fileSeq    uint64        // the checkpoint last written (guarded by fileMu)
}

func newJournal(dir, sess, graphName string, clk clock.Clock) *journal {
	return &journal{dir: dir, clk: clk, sess: sess, graph: graphName, keep: uint64(JournalKeep),
		retries: map[string]int{}, outcomes: map[string]string{}, visits: map[string]int{},
		pending: map[string]*pb.Envelope{}, ctxs: map[string]runCtx{}, status: "running"}
}

// restore loads a checkpoint into the journal and returns the pending
// envelopes to republish.
func (j *journal) restore(cp *Checkpoint) ([]*pb.Envelope, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.completed = append([]string(nil), cp.CompletedNodes...)
	for k, v := range cp.NodeRetries {
		j.retries[k] = v
	}
	for k, v := range cp.NodeOutcomes {
		j.outcomes[k] = v
	}
	for k, v := range cp.NodeVisits {
		j.visits[k] = v
	}
	cur := emptyCtx()
	for k, v := range cp.Context {
		cur = cur.Set(k, v)
	}
	j.cur = madeCtx(cur)
	j.current, j.firings, j.seq = cp.CurrentNode, cp.Firings, cp.Seq
	j.snapAt = cp.Seq
	j.consumed = map[string]*consumedHeap{}
	for _, c := range cp.Consumed {
		j.addConsumed(c)
	}
	j.floors = map[string]uint64{}
	for k, v := range cp.Floors {
		j.floors[k] = v
	}
	j.sched = cp.Scheduler
	if j.kv != nil || j.offline {
		j.at = cp.Timestamp
	}
	j.status, j.reason = cp.Status, cp.FailureReason
	var out []*pb.Envelope
	for _, raw := range cp.Pending {
		env := &pb.Envelope{}
		if err := protojson.Unmarshal(raw, env); err != nil {
			return nil, fmt.Errorf("session: checkpoint pending envelope: %w", err)
		}
		j.pending[env.GetId()] = env
		j.order = append(j.order, env.GetId())
		j.trackContext(env, "", nil)
		out = append(out, env)
	}
	return out, nil
}

// add records envelopes published outside a firing (the first one).
func (j *journal) add(envs ...*pb.Envelope) error {
	j.wmu.Lock()
	defer j.wmu.Unlock()
	j.mu.Lock()
	j.addLocked(envs)
	if j.kv == nil {
		defer j.mu.Unlock()
		return j.saveLocked()
	}
	j.appendRecordLocked(context.Background(), nil, envs, false, nil)
	j.mu.Unlock()
	return j.writeHeld(context.Background())
}

func (j *journal) addLocked(envs []*pb.Envelope) {
	for _, e := range envs {
		if _, ok := j.pending[e.GetId()]; !ok {
			j.pending[e.GetId()] = e
			j.order = append(j.order, e.GetId())
			j.trackContext(e, "", nil)
		}
	}
}

// Commit implements actors.Journal. A durable commit waits for its record
// within ctx (CommitAsync does not): when ctx ends first (the session
// stopping) the firing may not be recorded, and a later flush or resume
// deals with it.
func (j *journal) Commit(ctx context.Context, c *actors.Commit) error {
	j.mu.Lock()
	if j.kv == nil {
		defer j.mu.Unlock()
		return j.commitFileLocked(c)
	}
	j.mu.Unlock()
	res := make(chan error, 1)
	j.CommitAsync(ctx, c, func(err error) { res <- err })
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// commitFileLocked commits c in a session that is not durable: in memory,
// and checkpoint.json (when there is a run directory) in the background.
func (j *journal) commitFileLocked(c *actors.Commit) error {
	if j.broken != nil {
		return j.broken
	}
	j.apply(c)
	if c.Status != "" {
		j.unsaved++
	}
	final := j.status != "running"
	var since time.Duration // since the last write: read only for a policy that says every so long
	if j.policy.Every > 0 {
		since = j.clk.Now().Sub(j.lastWrite)
	}
	if !j.policy.due(j.unsaved, since, c.Status == "fail", final) {
		return nil
	}
	j.seq++
	j.unsaved = 0
	if j.policy.Every > 0 {
		j.lastWrite = j.clk.Now()
	}
	switch {
	case j.dir == "":
		return nil
	case final:
		// The end is written before the session completes; the firings
		// the writer had not saved yet are saved by it.
		nodes := make([]string, 0, len(j.fileTaken)+len(j.fileNodes)+1)
		nodes = append(append(append(nodes, j.fileTaken...), j.fileNodes...), c.Node)
		j.fileTaken, j.fileNodes, j.fileDirty = nil, nil, false
		if j.status == "success" && j.cleanup {
			_, err := j.writeFile(nil, j.seq, nodes[:len(nodes)-1])
			return err
		}
		_, err := j.writeFile(j.snapshot(), j.seq, nodes)
		return err
	}
	// The firing does not wait for the disk: the writer saves the latest
	// state, one write at a time, so firings that end while a write is
	// under way are saved together by the next one.
	j.fileDirty, j.fileNodes = true, append(j.fileNodes, c.Node)
	if j.fileClosed {
		return nil
	}
	if j.fileWake == nil {
		j.fileWake, j.fileDone = make(chan struct{}, 1), make(chan struct{})
		go j.fileWriter(j.fileWake)
	}
	select {
	case j.fileWake <- struct{}{}:
	default: // already woken: it will see this commit
	}
	return nil
}

// fileWriter writes checkpoint.json whenever a commit left it behind,
// until flush closes wake.
func (j *journal) fileWriter(wake chan struct{}) {
	defer close(j.fileDone)
	for range wake {
		j.mu.Lock()
		if !j.fileDirty {
			j.mu.Unlock()
			continue
		}
		cp, seq := j.snapshot(), j.seq
		j.fileTaken = append(j.fileTaken, j.fileNodes...)
		j.fileDirty, j.fileNodes = false, nil
		j.mu.Unlock()
		if afterWriterTake != nil {
			afterWriterTake()
		}
		saved, err := j.writeFile(cp, seq, nil)
		j.mu.Lock()
		nodes := j.fileTaken // nil when the final write reported them
		j.fileTaken = nil
		j.mu.Unlock()
		if err == nil {
			j.saved(saved, nodes)
		}
		if err != nil {
			j.mu.Lock()
			if j.broken == nil {
				// The next commit fails the session, as a failed write did
				// when it was made in the commit.
				j.broken = fmt.Errorf("checkpoint: %w", err)
			}
			j.mu.Unlock()
		}
	}
}

// savedRecord is a record (a checkpoint, for a file) a write stored, and
// the node whose commit it holds (onSaved).
type savedRecord struct {
	seq  uint64
	node string
}

// saved tells onSaved that checkpoint seq holds the commits of nodes.
func (j *journal) saved(seq uint64, nodes []string) {
	if j.onSaved == nil || len(nodes) == 0 {
		return
	}
	rs := make([]savedRecord, len(nodes))
	for i, n := range nodes {
		rs[i] = savedRecord{seq: seq, node: n}
	}
	j.onSaved(rs)
}

// writeFile writes checkpoint seq (nil: removes the checkpoint, a
// successful session's end) unless a later one was written already, and
// reports it saved for the nodes whose commits it holds. It returns the
// checkpoint that holds seq's firings: seq, or the later one.
func (j *journal) writeFile(cp *Checkpoint, seq uint64, nodes []string) (uint64, error) {
	j.fileMu.Lock()
	defer j.fileMu.Unlock()
	if seq <= j.fileSeq {
		// A later checkpoint, which holds these firings too, was written
		// (the session's end, while the writer held this one): they were
		// saved by it.
		j.saved(j.fileSeq, nodes)
		return j.fileSeq, nil
	}
	j.fileSeq = seq
	if beforeFileWrite != nil {
		beforeFileWrite()
	}
	path := filepath.Join(j.dir, "checkpoint.json")
	if cp == nil {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return 0, err
		}
	} else {
		data, err := json.MarshalIndent(cp, "", "  ")
		if err != nil {
			return 0, err
		}
		if err := writeFileAtomic(path, data, true); err != nil {
			return 0, err
		}
	}
	j.saved(seq, nodes)
	return seq, nil
}

// beforeFileWrite, when set (tests), runs before each write of
// checkpoint.json, holding the write lock.
var beforeFileWrite func()

// afterWriterTake, when set (tests), runs in the background writer between
// taking a checkpoint to write and writing it.
var afterWriterTake func()

// flush writes what is not written yet: the records a sparse policy holds
// (durable), the last state of checkpoint.json (not durable). A session
// stopping gracefully loses nothing.
func (j *journal) flush() error {
	if j.kv != nil {
		j.mu.Lock()
		j.lingerOff = true // what it would write is written here
		if j.linger != nil {
			j.linger.Stop()
		}
		j.mu.Unlock()
		j.wmu.Lock()
		err := j.writeHeld(context.Background())
		j.acks.close()
		j.wmu.Unlock()
		j.wwg.Wait() // the writer finds nothing due and ends
		j.mwg.Wait() // and the upkeep ends
		j.mu.Lock()
		owed := j.owed
		j.mu.Unlock()
		if owed != nil && j.js != nil && j.js.Conn().IsConnected() {
			// The last upkeep was skipped while an earlier one ran: a
			// stopped session's store is compacted as far as its records
			// allow, not two or three intervals behind (when the server
			// is there to ask).
			j.wmu.Lock()
			j.maintainLocked(owed.last, owed.floors)
			j.wmu.Unlock()
			j.mwg.Wait()
		}
		return err
	}
	j.mu.Lock()
	j.fileClosed = true
	wake, done := j.fileWake, j.fileDone
	j.fileWake = nil
	var cp *Checkpoint
	seq, nodes := j.seq, j.fileNodes
	if j.fileDirty && j.dir != "" {
		cp, j.fileDirty, j.fileNodes = j.snapshot(), false, nil
	}
	j.mu.Unlock()
	if wake != nil {
		close(wake)
		<-done
	}
	if cp == nil {
		return nil
	}
	_, err := j.writeFile(cp, seq, nodes)
	return err
}

// keepContext reports whether the journal keeps the run context (it is
// written somewhere).
func (j *journal) keepContext() bool { return j.dir != "" || j.kv != nil || j.offline }

// KeepsContext implements actors.ContextKeeper: a journal that keeps no
// run context is given no whole context in its commits. Asked once, when
// the session's actors are made (its store and directory are set by then).
func (j *journal) KeepsContext() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.keepContext()
}

// apply changes the state by one commit; it does no I/O.
func (j *journal) apply(c *actors.Commit) {
	// The contexts first: the commit's and its envelopes' are deltas over
	// the context of an envelope it consumes.
	var base *runCtx
	if b, ok := j.ctxs[c.Base]; ok && c.Base != "" {
		base = &b
	}
	if c.Status != "" && j.keepContext() {
		switch {
		case c.Base == "":
			j.cur = newCtx(nil, c.Context)
		case base != nil:
			j.cur = newCtx(base.c, c.Context)
		}
		// else: a base the journal never held (not resolvable after a
		// resume either); the last context stays the one before.
	}
	for _, e := range c.Produced {
		if _, ok := j.pending[e.GetId()]; ok || !j.keepContext() {
			continue
		}
		if c.Status != "" && (base != nil || c.Base == "") && e.GetContextBase() == c.Base && sameKVs(e.GetContext(), c.Context) {
			j.ctxs[e.GetId()] = runCtx{c: j.cur, version: e.GetContextVersion()} // the firing's own context
			continue
		}
		j.trackContext(e, c.Base, base)
	}
	for i, id := range c.Consumed {
		delete(j.pending, id)
		delete(j.ctxs, id)
		if i < len(c.Seqs) && c.Seqs[i] > 0 {
			j.addConsumed(ConsumedEnvelope{ID: id, Node: c.Node, Seq: c.Seqs[i]})
		}
	}
	if c.Seqs != nil {
		j.trimConsumed(c.Node, c.Floor)
	}
	j.lastStatus = c.Status
	for _, e := range c.Produced {
		if _, ok := j.pending[e.GetId()]; !ok {
			j.pending[e.GetId()] = e
			j.order = append(j.order, e.GetId())
		}
	}
	if c.Status != "" {
		j.completed = append(j.completed, c.Node)
		if len(j.completed) >= 2*maxCompleted {
			// Trimmed once per maxCompleted firings, not at each: moving
			// the last maxCompleted at every firing was an eighth of a
			// reactive node's ingest.
			j.completed = append(j.completed[:0], j.completed[len(j.completed)-maxCompleted:]...)
		}
		j.outcomes[c.Node] = c.Status
		j.visits[c.Node] = int(c.Firing)
		j.firings++
		j.current = c.Node
	}
	if c.Status != "" && j.keepContext() {
		for _, kv := range c.Context {
			if len(kv.Key) > len("internal.retry_count.") && kv.Key[:len("internal.retry_count.")] == "internal.retry_count." {
				n, _ := strconv.Atoi(kv.Value) // written by strconv.Itoa (actors)
				j.retries[kv.Key[len("internal.retry_count."):]] = n
			}
		}
	}
	if t := c.Terminal; t != nil {
		if t.Status == "fail" {
			j.failed = true
			if j.reason == "" {
				j.reason = t.Reason
			}
		}
		if t.Final || len(j.pending) == 0 {
			j.status = "success"
			if j.failed {
				j.status = "fail"
			}
		}
	}
}

// recordSched is the scheduler's state a journal record of node's commit
// holds: what the firing changed, when the scheduler says (a whole
// snapshot per record grew with the graph), else all of it.
func (j *journal) recordSched(node string) *scheduler.Snapshot {
	switch {
	case j.schedOf != nil:
		return j.schedOf(node)
	case j.schedSnap != nil:
		return j.schedSnap()
	}
	return nil
}

// recordCount is recordSched when that is only counters (countState):
// ok only where recordSched would be the scheduler's SnapshotOf.
func (j *journal) recordCount(node string) (scheduler.Count, bool) {
	if j.schedOf == nil || j.schedCount == nil {
		return scheduler.Count{}, false
	}
	return j.schedCount(node)
}

// mergeSched applies a replayed record's scheduler state: a partial one
// over the state before it, a whole one instead of it.
func (j *journal) mergeSched(snap *scheduler.Snapshot) {
	if j.sched == nil {
		j.sched = &scheduler.Snapshot{}
	}
	j.sched.Merge(*snap)
}

// maxCompleted bounds the completed_nodes list of a checkpoint (the most
// recent completions; the journal holds up to twice as many between
// trims): a reactive session may run for days. Visit counts
// per node are kept in full.
const maxCompleted = 1000

// trimConsumed forgets the node's consumed envelopes at or below its new
// acknowledgement floor: JetStream will not deliver those again. Each is
// forgotten once, lowest first: amortised O(log n) per envelope, however
// many the node keeps above its floor.
func (j *journal) trimConsumed(node string, floor uint64) {
	if j.floors == nil {
		j.floors = map[string]uint64{}
	}
	if floor <= j.floors[node] {
		return
	}
	j.floors[node] = floor
	h := j.consumed[node]
	if h == nil {
		return
	}
	for {
		if low, ok := h.min(); !ok || low.Seq > floor {
			break
		}
		h.pop()
	}
	if h.Len() == 0 {
		delete(j.consumed, node)
	}
}

// addConsumed keeps a consumed envelope above its node's floor.
func (j *journal) addConsumed(c ConsumedEnvelope) {
	if j.consumed == nil {
		j.consumed = map[string]*consumedHeap{}
	}
	h := j.consumed[c.Node]
	if h == nil {
		h = &consumedHeap{}
		j.consumed[c.Node] = h
	}
	h.push(c)
}

// consumedList is every consumed envelope kept, node by node in order,
// lowest sequence first within each.
func (j *journal) consumedList() []ConsumedEnvelope {
	nodes := make([]string, 0, len(j.consumed))
	n := 0
	for node, h := range j.consumed {
		nodes = append(nodes, node)
		n += h.Len()
	}
	sort.Strings(nodes)
	out := make([]ConsumedEnvelope, 0, n)
	for _, node := range nodes {
		start := len(out)
		out = j.consumed[node].appendTo(out)
		part := out[start:]
		sort.Slice(part, func(a, b int) bool { return part[a].Seq < part[b].Seq })
	}
	return out
}

// consumedHeap is a node's consumed envelopes, lowest sequence first: the
// ones consumed in stream order (nearly all: a queue's envelopes are
// consumed as they were delivered) in a list, forgotten from its head in
// O(1), and the others in a min-heap (a queue alone, one envelope above
// the last, was a heap's pop of O(log n) per envelope: 1.2% of a durable
// ingest's CPU).
type consumedHeap struct {
	inOrder []ConsumedEnvelope // ascending from head on
	head    int
	rest    []ConsumedEnvelope // a min-heap by sequence
}

func (h *consumedHeap) Len() int { return len(h.inOrder) - h.head + len(h.rest) }

func consumedLess(a, b ConsumedEnvelope) bool { return a.Seq < b.Seq }

// push adds c.
func (h *consumedHeap) push(c ConsumedEnvelope) {
	if n := len(h.inOrder); n == h.head || h.inOrder[n-1].Seq <= c.Seq {
		h.inOrder = append(h.inOrder, c)
		return
	}
	minheap.Push(&h.rest, c, consumedLess)
}

// min is the envelope of the lowest sequence, if any.
func (h *consumedHeap) min() (ConsumedEnvelope, bool) {
	switch {
	case h.head < len(h.inOrder) && (len(h.rest) == 0 || h.inOrder[h.head].Seq <= h.rest[0].Seq):
		return h.inOrder[h.head], true
	case len(h.rest) > 0:
		return h.rest[0], true
	}
	return ConsumedEnvelope{}, false
}

// pop forgets the envelope of the lowest sequence (there is one).
func (h *consumedHeap) pop() {
	if h.head == len(h.inOrder) || (len(h.rest) > 0 && h.rest[0].Seq < h.inOrder[h.head].Seq) {
		minheap.Pop(&h.rest, consumedLess)
		return
	}
	h.inOrder[h.head] = ConsumedEnvelope{} // no reference kept
	h.head++
	switch {
	case h.head == len(h.inOrder):
		h.inOrder, h.head = h.inOrder[:0], 0
	case h.head >= 64 && 2*h.head >= len(h.inOrder):
		// What is left moves to the front: amortised O(1) an envelope.
		n := copy(h.inOrder, h.inOrder[h.head:])
		clear(h.inOrder[n:])
		h.inOrder, h.head = h.inOrder[:n], 0
	}
}

// appendTo appends every envelope kept to out, in no particular order.
func (h *consumedHeap) appendTo(out []ConsumedEnvelope) []ConsumedEnvelope {
	return append(append(out, h.inOrder[h.head:]...), h.rest...)
}

// consumedIDs are the ids of the consumed envelopes the journal keeps.
func (j *journal) consumedIDs() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []string
	for _, h := range j.consumed {
		for _, c := range h.appendTo(nil) {
			out = append(out, c.ID)
		}
	}
	return out
}

// done reports whether the run has ended, and how.
func (j *journal) done() (bool, string, string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.status != "running", j.status, j.reason
}

// live is the number of envelopes not yet consumed.
func (j *journal) live() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.pending)
}

func (j *journal) snapshot() *Checkpoint {
	stamp := j.clk.Now().UTC()
	if !j.at.IsZero() {
		stamp = j.at.UTC()
	}
	cp := &Checkpoint{
		Timestamp: stamp, SessionID: j.sess, Graph: j.graph, CurrentNode: j.current,
		CompletedNodes: append([]string{}, j.completed[max(0, len(j.completed)-maxCompleted):]...),
		NodeRetries:    copyMap(j.retries), Context: whole(j.cur.get()),
		NodeOutcomes: copyMap(j.outcomes), NodeVisits: copyMap(j.visits),
		Firings: j.firings, Seq: j.seq, Status: j.status, FailureReason: j.reason, Logs: []string{},
		NodeStatus: j.lastStatus,
	}
	if len(j.consumed) > 0 {
		cp.Consumed = j.consumedList()
	}
	if len(j.floors) > 0 {
		cp.Floors = copyMap(j.floors)
	}
	if j.schedSnap != nil {
		cp.Scheduler = j.schedSnap()
	} else if j.sched != nil {
		cp.Scheduler = j.sched
	}
	kept := j.order[:0]
	for _, id := range j.order {
		e, ok := j.pending[id]
		if !ok {
			continue
		}
		kept = append(kept, id)
		raw, err := protojson.Marshal(j.wholeEnvelope(e))
		if err == nil {
			cp.Pending = append(cp.Pending, raw)
		}
	}
	j.order = kept
	return cp
}

func (j *journal) saveLocked() error {
	j.seq++
	j.unsaved, j.lastWrite = 0, j.clk.Now()
	if j.dir == "" {
		return nil
	}
	_, err := j.writeFile(j.snapshot(), j.seq, nil)
	return err
}

// writeFileAtomic writes data to a temporary file and renames it over path,
// so a crash leaves either the old or the new checkpoint, never a torn one;
// with sync, the data is on disk before the rename (the file is the
// session's record: a session that is not durable).
func writeFileAtomic(path string, data []byte, sync bool) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".checkpoint-*")
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	var serr error
	if sync {
		serr = f.Sync()
	}
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), path)
}

func copyMap[V any](m map[string]V) map[string]V {
	out := make(map[string]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
