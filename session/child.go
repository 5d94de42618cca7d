package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchyard/switchyard/actors"
	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/nodes"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// childRunner runs stack.manager_loop children as sub-sessions on the same
// broker, with the parent's handlers.
type childRunner struct {
	parent *Session
	mu     sync.Mutex
	n      int
}

var _ nodes.ChildRunner = (*childRunner)(nil)

// Start loads the child pipeline and starts it as session
// <parent>-child<n>; a relative dotfile is resolved against workdir.
func (r *childRunner) Start(ctx context.Context, dotfile, workdir string) (nodes.Child, error) {
	path := dotfile
	if !filepath.IsAbs(path) && workdir != "" {
		if _, err := os.Stat(filepath.Join(workdir, path)); err == nil {
			path = filepath.Join(workdir, path)
		}
	}
	g, diags := graph.LoadFile(path)
	if diags.HasErrors() {
		return nil, fmt.Errorf("child pipeline %s:\n%s", path, diags.Errors())
	}
	r.mu.Lock()
	r.n++
	n := r.n
	r.mu.Unlock()
	p := r.parent.cfg
	c := &child{done: make(chan struct{}), status: nodes.ChildStatus{State: "running"}}
	cfg := Config{
		ID: fmt.Sprintf("%s-child%d", r.parent.id, n), Graph: g, Broker: p.Broker, Registry: r.parent.registry,
		WorkDir: workdir, Clock: p.Clock, Logger: p.Logger, Backoff: p.Backoff, Observer: c.observe,
	}
	if p.LogsDir != "" {
		cfg.LogsDir = filepath.Join(p.LogsDir, "children", fmt.Sprintf("child%d", n))
		c.logs = cfg.LogsDir
	}
	s, err := Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	c.s = s
	return c, nil
}

// child is a running sub-session.
type child struct {
	s    *Session
	logs string
	done chan struct{}
	once sync.Once

	mu      sync.Mutex
	status  nodes.ChildStatus
	steered int
}

func (c *child) observe(ev *pb.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch ev.GetKind() {
	case "node.started":
		c.status.CurrentNode = ev.GetNode()
	case "node.completed":
		c.status.Completed++
	case "session.completed":
		c.status.Outcome = ev.GetStatus()
		c.status.State = "completed"
		if ev.GetStatus() != "success" {
			c.status.State = "failed"
			c.status.Reason = ev.GetMessage()
			for _, kv := range ev.GetAttrs() {
				switch kv.GetKey() {
				case "failed_node":
					c.status.FailedNode = kv.GetValue()
				case "cause":
					c.status.Cause = kv.GetValue()
				}
			}
		}
		c.once.Do(func() { close(c.done) })
	}
}

func (c *child) Status() nodes.ChildStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status
}

// Steer sends the message into the inbox of the child's current node (its
// start node before any ran) as an envelope of kind steer: it fires
// nothing, and the child's next firing of a node that does work gets it as
// an input message ("Input (steer): ..." in an agent's prompt).
func (c *child) Steer(ctx context.Context, msg string) error {
	c.mu.Lock()
	node := c.status.CurrentNode
	c.steered++
	n := c.steered
	c.mu.Unlock()
	if node == "" {
		if st := c.s.cfg.Graph.StartNode(); st != nil {
			node = st.ID
		}
	}
	if node == "" {
		return errors.New("the child has no node to steer")
	}
	env := &pb.Envelope{Id: fmt.Sprintf("%s.steer.%d", c.s.id, n), SessionId: c.s.id, Kind: actors.KindSteer,
		ToNode: node, CreatedAt: timestamppb.New(c.s.cfg.Clock.Now()), Payload: &pb.Payload{Message: msg}}
	return c.s.sys.Send(ctx, broker.NodeIn(c.s.id, node), env)
}

func (c *child) Done() <-chan struct{} { return c.done }

func (c *child) Stop() { c.s.Stop() }
