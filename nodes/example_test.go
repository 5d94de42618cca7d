package nodes_test

import (
	"context"
	"fmt"

	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/nodes"
)

// A custom handler is registered under a dotted type and chosen by a node's
// type attribute.
func ExampleRegistry_Register() {
	r := nodes.NewRegistry()
	_ = nodes.RegisterBuiltins(r, nodes.Deps{})
	err := r.Register(nodes.Info{Type: "acme.greet", Handler: nodes.HandlerFunc(
		func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
			return &nodes.Outcome{Status: nodes.StatusSuccess, Response: "hello, " + in.Node.Attrs.String("who")}, nil
		})})
	if err != nil {
		fmt.Println(err)
		return
	}
	g, _ := graph.Load("x.dot", []byte(`digraph x { start [shape=Mdiamond]; hi [type="acme.greet", who="world"]; exit [shape=Msquare]; start -> hi -> exit }`),
		graph.WithKnownTypes(r.Types()...))
	h, _ := r.Lookup(g.HandlerType(g.Node("hi")))
	o, _ := h.Handle(context.Background(), &nodes.Input{Graph: g, Node: g.Node("hi")})
	fmt.Println(o.Status, o.Response)
	// Output: success hello, world
}
