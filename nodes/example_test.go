package nodes_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/middleware"
	"github.com/switchyard/switchyard/nodes"
)

// A custom handler is registered under a dotted type and chosen by a node's
// type attribute.
func ExampleRegistry_Register() {
	r := nodes.NewRegistry()
	_ = nodes.RegisterBuiltins(r, nodes.Deps{})
	err := r.Register(nodes.Info{Type: "acme.greet", Doc: "greets someone", Handler: nodes.HandlerFunc(
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

// Replacing a built-in is deliberate: Register refuses, Replace does it.
func ExampleRegistry_Replace() {
	r := nodes.NewRegistry()
	_ = nodes.RegisterBuiltins(r, nodes.Deps{})
	quiet := nodes.HandlerFunc(func(context.Context, *nodes.Input) (*nodes.Outcome, error) {
		return &nodes.Outcome{Status: nodes.StatusSkipped, Notes: "tools are off"}, nil
	})
	fmt.Println(r.Register(nodes.Info{Type: "tool", Handler: quiet}))
	fmt.Println(r.Replace(nodes.Info{Type: "tool", Handler: quiet}))
	// Output:
	// nodes: handler type already registered: "tool"
	// <nil>
}

// Middleware wraps handlers; the first one given is the outermost.
func ExampleChain() {
	logged := func(next nodes.Handler) nodes.Handler {
		return nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
			o, err := next.Handle(ctx, in)
			if err != nil {
				fmt.Println("failed:", strings.SplitN(err.Error(), "\n", 2)[0])
			}
			return o, err
		})
	}
	boom := nodes.HandlerFunc(func(context.Context, *nodes.Input) (*nodes.Outcome, error) { panic("out of coffee") })
	_, _ = nodes.Chain(boom, logged, middleware.Recover()).Handle(context.Background(), &nodes.Input{})
	// Output: failed: handler panicked: out of coffee
}

func ExampleDetectOutcomeMarker() {
	for _, text := range []string{"All tests pass.\nOUTCOME:PASS", "outcome=fail: 3 tests broke", "I think it works"} {
		st, ok := nodes.DetectOutcomeMarker(text)
		fmt.Printf("%q %v\n", st, ok)
	}
	// Output:
	// "success" true
	// "fail" true
	// "" false
}

// A human gate's choices come from its outgoing edges; answers match keys,
// labels or targets.
func ExampleMatch() {
	g, _ := graph.Load("g.dot", []byte(`digraph g { start [shape=Mdiamond]; review [shape=hexagon]; ship; fix; exit [shape=Msquare]
		start -> review; review -> ship [label="[A] Approve"]; review -> fix [label="F) Fix it"]; ship -> exit; fix -> exit }`))
	opts := nodes.Choices(g, "review")
	for _, o := range opts {
		fmt.Printf("[%s] %s -> %s\n", o.Key, o.Label, o.Target)
	}
	for _, answer := range []string{"a", "fix it", "fix"} {
		o, _ := nodes.Match(opts, answer)
		fmt.Println(answer, "=>", o.Target)
	}
	// Output:
	// [A] [A] Approve -> ship
	// [F] F) Fix it -> fix
	// a => ship
	// fix it => fix
	// fix => fix
}

// A Queue answers gates from pre-set answers, as `switchyard run --answer
// review=A` does; a gate with none left is skipped.
func ExampleNewQueue() {
	q := nodes.NewQueue(map[string][]string{"review": {"F", "A"}})
	for range 3 {
		a, _ := q.Ask(context.Background(), &nodes.Question{Stage: "review"})
		fmt.Println(a.Value)
	}
	// Output:
	// F
	// A
	// SKIPPED
}
