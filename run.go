package switchyard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/nodes/agent"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

// Run runs g as a session to its end and returns the report. The session
// runs on the real runtime: a private embedded NATS server (unless
// WithBroker), one actor per node, checkpoints after every envelope
// (unless WithoutCheckpoints or WithCheckpoint). The caller of ctx
// (nodes.WithCaller) reaches every node. If ctx ends first, the session is
// stopped (its checkpoint stays, see Resume) and the report so far is
// returned with ctx's error. A run that failed (Report.Status RunFail)
// returns its report and a *RunError that names the node and wraps the
// cause: errors.Is(err, scheduler.ErrBudgetExceeded) and the like.
//
// Run always returns a report: when the session could not be started (a
// graph that does not build, a broker that cannot start, ctx ending before
// the session was recorded) its Status is fail and its Reason the error.
func Run(ctx context.Context, g *Graph, in Message, opts ...Option) (*Report, error) {
	ex, err := start(ctx, g, &in, "", opts, false)
	if err != nil {
		return ex.notStarted(err), err
	}
	return ex.Wait(ctx)
}

// notStarted is the report of a session that could not be started: every
// node skipped.
func (e *Execution) notStarted(err error) *Report {
	id := e.cfg.id
	if se := (*session.StartError)(nil); errors.As(err, &se) {
		id = se.ID // the id the session was given
	}
	rep := &Report{SessionID: id, Status: "fail", Reason: err.Error()}
	if e.g != nil {
		for _, n := range e.g.Nodes {
			rep.Nodes = append(rep.Nodes, NodeReport{Node: n.ID, Status: NodeSkipped})
		}
	}
	return rep
}

// Stream starts g as a session and returns at once: read its events from
// Execution.Events, wait for its report with Execution.Wait.
func Stream(ctx context.Context, g *Graph, in Message, opts ...Option) (*Execution, error) {
	ex, err := start(ctx, g, &in, "", opts, true)
	if err != nil {
		return nil, err
	}
	return ex, nil
}

// Resume continues the session id of g from its last checkpoint and runs it
// to its end: the nodes that completed are not run again, the envelopes
// that were pending are delivered, a human gate that was waiting asks
// again. The session's store must be reachable: the same WithDataDir (or
// WithBroker) as the run that wrote it.
//
// Like Run, Resume always returns a report.
func Resume(ctx context.Context, g *Graph, id string, opts ...Option) (*Report, error) {
	ex, err := start(ctx, g, nil, id, opts, false)
	if err != nil {
		return ex.notStarted(err), err
	}
	return ex.Wait(ctx)
}

// ResumeStream is Resume returning at once, like Stream.
func ResumeStream(ctx context.Context, g *Graph, id string, opts ...Option) (*Execution, error) {
	ex, err := start(ctx, g, nil, id, opts, true)
	if err != nil {
		return nil, err
	}
	return ex, nil
}

// Execution is a running session.
type Execution struct {
	s      *session.Session
	b      *broker.Broker
	ownB   bool
	cfg    runConfig
	g      *graph.Graph
	stream bool

	mu       sync.Mutex
	last     string            // the last output recorded (when hasLast)
	lastMeta map[string]string // its metadata (nil: none; a Message only for the report)
	hasLast  bool
	result   *Message          // the state at the exit node
	outputs  map[string]string // node id -> full output
	errs     map[string]string // node id -> failure reason of its last visit
	finished bool              // no event follows
	queue    []Event
	wake     chan struct{}
	events   chan Event
	closed   chan struct{}
	pumpDone chan struct{}

	stopOnce  sync.Once
	closeOnce sync.Once
	report    *Report
}

// start starts (or resumes) the session. It returns the execution also
// when it fails, for the report of a session that did not start.
func start(ctx context.Context, g *Graph, in *Message, resumeID string, opts []Option, stream bool) (*Execution, error) {
	var cfg runConfig
	for _, o := range opts {
		o(&cfg)
	}
	if resumeID != "" {
		cfg.id = resumeID
	}
	// Without WithSessionID the session names itself: a durable pipeline
	// may then take a store made ahead for it, id and all (session's
	// prepared stores).
	ex := &Execution{cfg: cfg, stream: stream, outputs: map[string]string{}, errs: map[string]string{},
		wake: make(chan struct{}, 1), closed: make(chan struct{})}
	built, err := g.Build()
	if err != nil {
		return ex, err
	}
	ex.g = built
	if ex.b = cfg.broker; ex.b == nil {
		bc := broker.Config{DataDir: cfg.dataDir, Memory: cfg.dataDir == "", ServerName: "switchyard", Logger: cfg.logger}
		if ex.b, err = broker.Start(ctx, bc); err != nil {
			return ex, err
		}
		ex.ownB = true
	}
	scfg := ex.sessionConfig(g, in)
	if resumeID != "" {
		if cfg.ephemeral {
			ex.closeBroker()
			return ex, errors.New("switchyard: resume needs checkpoints; WithoutCheckpoints has none")
		}
		ex.s, err = session.Resume(ctx, scfg)
	} else {
		ex.s, err = session.Start(ctx, scfg)
	}
	if err != nil {
		ex.closeBroker()
		return ex, err
	}
	return ex, nil
}

func (e *Execution) sessionConfig(g *Graph, in *Message) session.Config {
	cfg := e.cfg
	// The agent providers are made when a node first asks for one: a
	// graph of Go agents never does (making them was 45 of the 2,250
	// allocations of a 10-node pipeline's Run).
	var (
		once sync.Once
		reg  *agent.Registry
	)
	providers := func(name string) (agent.Provider, error) {
		once.Do(func() {
			reg = agent.NewRegistry()
			reg.Register("mock", agent.NewMock(nil))
			agent.RegisterCLI(reg, agent.CLIOptions{Logger: cfg.logger})
			for name, p := range cfg.providers {
				reg.Register(name, p)
			}
		})
		return reg.Lookup(name)
	}
	def := cfg.defProvider
	if def == "" {
		def = "mock"
	}
	handlers := maps.Clone(g.types)
	sc := session.Config{
		ID: cfg.id, Graph: e.g, Broker: e.b, Durable: !cfg.ephemeral,
		Deps:           nodes.Deps{Providers: providers, DefaultProvider: def, Interviewer: cfg.interviewer, Clock: cfg.clk, Logger: cfg.logger},
		ControlAnswers: true, Handlers: handlers,
		Middleware: append([]Middleware{e.stateMiddleware}, cfg.mws...),
		LogsDir:    cfg.logsDir, WorkDir: cfg.workDir, Clock: cfg.clk, Logger: cfg.logger,
		Observer: e.observe, ObserverWants: e.wants, Backoff: cfg.backoff, Caller: cfg.caller, Checkpoint: cfg.checkpoint,
	}
	// Until Run returns, what reaches the session comes through the
	// broker's connection (the input, answers, Publish) or from someone
	// who heard from it there — unless an execution streams its events or
	// a hook sees its first one: its subscriptions need no round trip.
	sc.NoSubscribeFlush = !e.stream && cfg.hooks.OnStart == nil && cfg.hooks.OnEvent == nil
	if sc.Checkpoint == nil && !cfg.ephemeral {
		sc.Checkpoint = &CheckpointPolicy{}
	}
	if in != nil {
		sc.Input = in.Text
		sc.Metadata = in.Metadata
		sc.Context = maps.Clone(cfg.context)
		if sc.Context == nil {
			sc.Context = map[string]string{}
		}
		sc.Context[KeyInput] = in.Text
	}
	return sc
}

// wants tells which event kinds observe needs (session.Config.ObserverWants):
// all of them for a stream or an OnEvent hook, else those it turns into
// hooks and errors.
func (e *Execution) wants(kind string) bool {
	if e.stream || e.cfg.hooks.OnEvent != nil {
		return true
	}
	switch kind {
	case "session.started", "session.resumed", "node.completed", "session.completed":
		return true
	}
	return false
}

// stateMiddleware gives Go code the state and records each node's output
// under its id and "_previous".
func (e *Execution) stateMiddleware(next nodes.Handler) nodes.Handler {
	return nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
		if in.Type == graph.TypeExit {
			e.mu.Lock()
			e.result = &Message{Text: in.Context[KeyPrevious], Metadata: maps.Clone(in.Metadata)}
			e.mu.Unlock()
		}
		// The runtime's map and messages, lent for the run: copied when it
		// returns only if Go code took the state (it may keep it, and the
		// runtime goes on changing the context after the run).
		sc := withState(ctx, in.Context, in.Messages)
		defer sc.live.end()
		o, err := next.Handle(sc, in)
		if err != nil || o == nil || !o.Status.IsSuccess() || o.Response == "" {
			return o, err
		}
		o.ValidUTF8() // as the runtime takes it: the report shows what the next nodes read
		updates := make(map[string]string, len(o.ContextUpdates)+2)
		maps.Copy(updates, o.ContextUpdates)
		updates[in.Node.ID] = o.Response
		updates[KeyPrevious] = o.Response
		o.ContextUpdates = updates
		var meta map[string]string // nil: none (the report's is an empty map)
		if len(in.Metadata) > 0 || len(o.Metadata) > 0 {
			meta = maps.Clone(in.Metadata)
			if meta == nil {
				meta = map[string]string{}
			}
			maps.Copy(meta, o.Metadata)
		}
		e.mu.Lock()
		e.last, e.lastMeta, e.hasLast = o.Response, meta, true
		e.outputs[in.Node.ID] = o.Response
		e.mu.Unlock()
		return o, nil
	})
}

// ID is the session id.
func (e *Execution) ID() string { return e.s.ID() }

// Graph is the graph the session runs, in the runtime's model.
func (e *Execution) Graph() *graph.Graph { return e.g }

// observe is the session's observer: hooks, the report's extras, the
// event stream.
func (e *Execution) observe(pe *pb.Event) {
	ev := eventOf(pe)
	h := e.cfg.hooks
	if h.OnEvent != nil {
		h.OnEvent(ev)
	}
	switch ev.Kind {
	case "session.started", "session.resumed":
		if h.OnStart != nil {
			h.OnStart(ev)
		}
	case "node.completed":
		e.mu.Lock()
		if r := ev.Attrs["failure_reason"]; r != "" {
			e.errs[ev.Node] = r
		} else {
			delete(e.errs, ev.Node)
		}
		e.mu.Unlock()
		if h.OnNode != nil {
			h.OnNode(ev)
		}
		if ev.Status == string(nodes.StatusFail) && h.OnError != nil {
			h.OnError(ev)
		}
	case "session.completed":
		if ev.Status != "success" && h.OnError != nil {
			h.OnError(ev)
		}
	}
	if e.stream {
		e.mu.Lock()
		e.queue = append(e.queue, ev)
		if ev.Kind == "session.completed" || ev.Kind == "session.stopped" {
			e.finished = true // the observer gets nothing after these
		}
		e.mu.Unlock()
		e.signal()
	}
}

func (e *Execution) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Events returns the session's events, in order, from its start; the
// channel is closed after the last one (session.completed, or
// session.stopped). Only a Stream or ResumeStream execution has events
// (nil otherwise). Read it to its end or call Close.
func (e *Execution) Events() <-chan Event {
	if !e.stream {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.events == nil {
		e.events = make(chan Event)
		e.pumpDone = make(chan struct{})
		go e.pump()
	}
	return e.events
}

// pump delivers queued events; it ends when the last one is delivered or
// the execution is closed.
func (e *Execution) pump() {
	defer close(e.pumpDone)
	defer close(e.events)
	for {
		e.mu.Lock()
		q, finished := e.queue, e.finished
		e.queue = nil
		e.mu.Unlock()
		for _, ev := range q {
			select {
			case e.events <- ev:
			case <-e.closed:
				return
			}
		}
		if len(q) == 0 {
			if finished {
				return
			}
			select {
			case <-e.wake:
			case <-e.closed:
				return
			}
		}
	}
}

// Wait blocks until the session ends (or ctx does: the session is then
// stopped, its checkpoint kept) and returns its report. A run that failed
// also returns a *RunError naming the node and wrapping the cause
// (errors.Is(err, scheduler.ErrBudgetExceeded)...); a run stopped by ctx
// returns ctx's error.
func (e *Execution) Wait(ctx context.Context) (*Report, error) {
	select {
	case <-e.s.Done():
	case <-ctx.Done():
	}
	rep := e.finish()
	if err := ctx.Err(); err != nil && rep.Status == RunRunning {
		return rep, err
	}
	sr := e.s.Report()
	return rep, runError(rep, sr.FailedNode, sr.Cause)
}

// Stop stops the session where it is, leaving its checkpoint (Resume goes
// on from there), and returns the report so far.
func (e *Execution) Stop() *Report { return e.finish() }

// Answer answers the human gate of node with choice (a key, label or
// target), as `switchyard answer` does. A choice that matches no option
// (or a node that is not a human gate) is refused with an error listing
// the options; an answer sent before the question is kept for it.
func (e *Execution) Answer(node, choice string) error {
	data, err := json.Marshal(session.AnswerMessage{Node: node, Choice: choice, By: "go"})
	if err != nil {
		return err
	}
	msg, err := e.b.Conn().Request(broker.Control(e.s.ID(), "answer"), data, 30*time.Second)
	if err != nil {
		return fmt.Errorf("switchyard: answer %s: %w", node, err)
	}
	var r session.AnswerReply
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		return fmt.Errorf("switchyard: answer %s: %w", node, err)
	}
	if !r.OK {
		return fmt.Errorf("switchyard: answer refused: %s", r.Error)
	}
	return nil
}

// Publish sends an outside event to the inbox of node, as `switchyard pub`
// does: the node fires on it (under its trigger), and a Go agent there
// gets msg.Text as its input in a reactive session. Metadata travels with
// it.
func (e *Execution) Publish(ctx context.Context, node string, msg Message) error {
	if e.g.Node(node) == nil {
		return fmt.Errorf("switchyard: publish: no node %s in session %s", node, e.s.ID())
	}
	env := &pb.Envelope{Id: e.s.ID() + ".pub." + nuid.Next(), SessionId: e.s.ID(), Kind: "handoff", ToNode: node,
		CreatedAt: timestamppb.Now(), Payload: &pb.Payload{Message: msg.Text}}
	for _, k := range slices.Sorted(maps.Keys(msg.Metadata)) {
		env.Metadata = append(env.Metadata, &pb.KV{Key: k, Value: msg.Metadata[k]})
	}
	if err := e.s.System().Send(ctx, broker.NodeIn(e.s.ID(), node), env); err != nil {
		return fmt.Errorf("switchyard: publish to %s: %w", node, err)
	}
	return nil
}

// Close stops the session if it runs and ends the event stream (events
// not read yet are dropped).
func (e *Execution) Close() {
	e.finish()
	e.closeOnce.Do(func() { close(e.closed) })
	e.mu.Lock()
	done := e.pumpDone
	e.mu.Unlock()
	if done != nil {
		<-done
	}
}

// finish stops the session and the private broker once, and builds the
// report.
func (e *Execution) finish() *Report {
	e.stopOnce.Do(func() {
		e.s.Stop()
		rep := e.buildReport(e.s.Report())
		e.mu.Lock()
		e.report = rep
		e.finished = true
		e.mu.Unlock()
		e.signal()
		e.closeBroker()
		if e.cfg.hooks.OnFinish != nil {
			e.cfg.hooks.OnFinish(rep)
		}
	})
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.report
}

func (e *Execution) closeBroker() {
	if e.ownB {
		_ = e.b.Close()
	}
}

// Report is the result of a session.
type Report struct {
	SessionID string
	// Status is RunSuccess or RunFail; RunRunning when the session was
	// stopped before it ended (it can be resumed).
	Status RunStatus
	Reason string
	// Result is the last output and the metadata that reached the end: at
	// the exit node when the session got there, else the last output
	// recorded.
	Result   Message
	Nodes    []NodeReport // visited nodes in order of first visit, then the others (skipped)
	Usage    Usage
	Duration time.Duration
}

// NodeReport is what a session did at one node.
type NodeReport struct {
	Node     string
	Status   NodeStatus // of the last visit
	Visits   int
	Attempts int // over all visits
	Duration time.Duration
	Output   string // the last output (in full)
	Usage    Usage
	Error    string // the failure reason of the last visit, also when skipped or continued
}

// Node returns the report of one node, or nil.
func (r *Report) Node(id string) *NodeReport {
	for i := range r.Nodes {
		if r.Nodes[i].Node == id {
			return &r.Nodes[i]
		}
	}
	return nil
}

func (e *Execution) buildReport(sr *session.Report) *Report {
	e.mu.Lock()
	defer e.mu.Unlock()
	rep := &Report{SessionID: e.s.ID(), Status: sr.Status, Reason: sr.Reason, Usage: sr.Usage, Duration: sr.Duration}
	switch {
	case e.result != nil:
		rep.Result = *e.result
	case e.hasLast:
		meta := e.lastMeta
		if meta == nil {
			meta = map[string]string{}
		}
		rep.Result = Message{Text: e.last, Metadata: meta}
	case e.s != nil && e.s.EndContext() != nil:
		// Resumed after its end was recorded: no node ran here, the
		// journal's last context holds what reached the end.
		rep.Result = Message{Text: e.s.EndContext()[KeyPrevious]}
	}
	rep.Nodes = make([]NodeReport, 0, max(len(sr.Nodes), len(e.g.Nodes)))
	seen := make(map[string]bool, len(sr.Nodes))
	for _, n := range sr.Nodes {
		seen[n.Node] = true
		st := NodeStatus(n.Status)
		out, ok := e.outputs[n.Node]
		if !ok {
			out = n.Output
		}
		rep.Nodes = append(rep.Nodes, NodeReport{Node: n.Node, Status: st, Visits: n.Visits, Attempts: n.Attempts,
			Duration: n.Duration, Output: out, Usage: n.Usage, Error: e.errs[n.Node]})
	}
	for _, n := range e.g.Nodes {
		if !seen[n.ID] {
			rep.Nodes = append(rep.Nodes, NodeReport{Node: n.ID, Status: NodeSkipped})
		}
	}
	return rep
}

// Event is one step of a session (the runtime's events, see
// docs/envelope.md): session.started, node.started, node.completed,
// edge.selected, human.question, session.completed...
type Event struct {
	Seq      uint64
	Time     time.Time
	Kind     string
	Session  string
	Node     string
	Edge     string
	Status   string
	Attempts int
	Duration time.Duration
	Message  string
	Usage    Usage
	Attrs    map[string]string
}

func eventOf(pe *pb.Event) Event {
	ev := Event{Seq: pe.GetSeq(), Kind: pe.GetKind(), Session: pe.GetSessionId(), Node: pe.GetNode(), Edge: pe.GetEdgeId(),
		Status: pe.GetStatus(), Attempts: int(pe.GetAttempts()), Duration: time.Duration(pe.GetDurationMs()) * time.Millisecond,
		Message: pe.GetMessage()}
	if t := pe.GetTime(); t != nil {
		ev.Time = t.AsTime()
	}
	if u := pe.GetUsage(); u != nil {
		ev.Usage = Usage{InputTokens: u.GetInputTokens(), OutputTokens: u.GetOutputTokens(), Cost: u.GetCost()}
	}
	if len(pe.GetAttrs()) > 0 {
		ev.Attrs = make(map[string]string, len(pe.GetAttrs()))
		for _, kv := range pe.GetAttrs() {
			ev.Attrs[kv.GetKey()] = kv.GetValue()
		}
	}
	return ev
}

// String renders the event on one line.
func (ev Event) String() string {
	s := ev.Kind
	if ev.Node != "" {
		s += " " + ev.Node
	}
	if ev.Status != "" {
		s += " " + ev.Status
	}
	if ev.Message != "" {
		s += fmt.Sprintf(" %q", ev.Message)
	}
	return s
}
