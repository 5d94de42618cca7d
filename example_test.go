package switchyard_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/switchyard/switchyard"
	"github.com/switchyard/switchyard/middleware"
	"github.com/switchyard/switchyard/nodes"
)

func reply(f func(string) string) switchyard.Agent {
	return switchyard.AgentFunc(func(_ context.Context, in switchyard.Message) (switchyard.Message, error) {
		return switchyard.Message{Text: f(in.Text)}, nil
	})
}

// Two Go agents in a chain: the second gets the first one's reply.
func Example_chain() {
	g := switchyard.New("shout").
		Agent("upper", reply(strings.ToUpper)).
		Agent("exclaim", reply(func(s string) string { return s + "!" })).
		Chain("upper", "exclaim")

	rep, err := switchyard.Run(context.Background(), g, switchyard.Message{Text: "hello"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(rep.Status, rep.Result.Text)
	for _, n := range rep.Nodes {
		fmt.Printf("%s: %s %q\n", n.Node, n.Status, n.Output)
	}
	// Output:
	// success HELLO!
	// start: success ""
	// upper: success "HELLO"
	// exclaim: success "HELLO!"
	// exit: success ""
}

// Metadata of the input reaches every node; what a node adds reaches every
// later one, later keys winning.
func Example_metadata() {
	tag := func(key, value string) switchyard.Agent {
		return switchyard.AgentFunc(func(_ context.Context, in switchyard.Message) (switchyard.Message, error) {
			fmt.Println("sees", sorted(in.Metadata))
			return switchyard.Message{Text: in.Text, Metadata: map[string]string{key: value}}, nil
		})
	}
	g := switchyard.New("tags").
		Agent("detect", tag("lang", "en")).
		Agent("translate", tag("lang", "fr")).
		Agent("publish", tag("published", "yes")).
		Chain("detect", "translate", "publish")

	rep, _ := switchyard.Run(context.Background(), g, switchyard.Message{Text: "hi", Metadata: map[string]string{"plan": "pro"}})
	fmt.Println("result", sorted(rep.Result.Metadata))
	// Output:
	// sees [plan=pro]
	// sees [lang=en plan=pro]
	// sees [lang=fr plan=pro]
	// result [lang=fr plan=pro published=yes]
}

func sorted(m map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"="+m[k])
	}
	return out
}

// A tool node gets its parameters from the state through a mapper; its
// result (here a struct) is its output, JSON-encoded.
func ExampleGraph_Tool() {
	type forecast struct {
		City string `json:"city"`
		Sky  string `json:"sky"`
	}
	weather := switchyard.ToolFunc(func(_ context.Context, p map[string]any) (any, error) {
		return forecast{City: p["city"].(string), Sky: "sunny"}, nil
	})
	g := switchyard.New("trip").
		Agent("city", reply(func(q string) string { return strings.TrimSuffix(strings.Fields(q)[2], "?") })).
		Tool("weather", weather, func(s switchyard.State) (map[string]any, error) {
			return map[string]any{"city": s.Output("city")}, nil
		}).
		Chain("city", "weather")

	rep, _ := switchyard.Run(context.Background(), g, switchyard.Message{Text: "weather in Lisbon?"})
	fmt.Println(rep.Result.Text)
	// Output: {"city":"Lisbon","sky":"sunny"}
}

// An output node combines results from the state; without it, the result
// would be the last node's output.
func ExampleGraph_Output() {
	g := switchyard.New("review").
		Agent("draft", reply(func(s string) string { return "a poem about " + s })).
		Agent("critique", reply(func(s string) string { return "too short" })).
		Output("result", func(s switchyard.State) (switchyard.Message, error) {
			return switchyard.Message{Text: fmt.Sprintf("draft: %s / critique: %s / asked: %s",
				s.Output("draft"), s.Output("critique"), s.Input())}, nil
		}).
		Chain("draft", "critique", "result")

	rep, _ := switchyard.Run(context.Background(), g, switchyard.Message{Text: "the sea"})
	fmt.Println(rep.Result.Text)
	// Output: draft: a poem about the sea / critique: too short / asked: the sea
}

// Edge conditions read the state: the classifier's output picks the path.
func Example_conditional() {
	g := switchyard.New("support").
		Agent("classify", reply(func(s string) string {
			if strings.Contains(s, "invoice") {
				return "billing"
			}
			return "tech"
		})).
		Agent("billing", reply(func(string) string { return "routed to accounts" }), switchyard.InputKey(switchyard.KeyInput)).
		Agent("tech", reply(func(string) string { return "routed to engineering" }), switchyard.InputKey(switchyard.KeyInput)).
		Edge("classify", "billing", switchyard.When("classify=billing")).
		Edge("classify", "tech", switchyard.When("classify=tech"))

	for _, q := range []string{"where is my invoice?", "the app crashes"} {
		rep, _ := switchyard.Run(context.Background(), g, switchyard.Message{Text: q})
		fmt.Printf("%s -> %s (tech %s)\n", q, rep.Result.Text, rep.Node("tech").Status)
	}
	// Output:
	// where is my invoice? -> routed to accounts (tech skipped)
	// the app crashes -> routed to engineering (tech success)
}

// Middleware wraps node handlers: here one that traces every node of the
// session, and a per-node retry around a flaky agent.
func Example_middleware() {
	trace := func(next nodes.Handler) nodes.Handler {
		return nodes.HandlerFunc(func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
			o, err := next.Handle(ctx, in)
			if err == nil {
				fmt.Printf("%s: %s\n", in.Node.ID, o.Status)
			}
			return o, err
		})
	}
	var calls atomic.Int32
	flaky := switchyard.AgentFunc(func(_ context.Context, in switchyard.Message) (switchyard.Message, error) {
		if calls.Add(1) < 3 {
			return switchyard.Message{}, errors.New("upstream busy")
		}
		return switchyard.Message{Text: "fetched " + in.Text}, nil
	})
	g := switchyard.New("fetch").Agent("fetch", flaky, switchyard.Use(middleware.Retry(3, nil)))

	rep, _ := switchyard.Run(context.Background(), g, switchyard.Message{Text: "page"}, switchyard.WithMiddleware(trace))
	fmt.Println(rep.Result.Text, "after", calls.Load(), "calls")
	// Output:
	// start: success
	// fetch: success
	// exit: success
	// fetched page after 3 calls
}

// A human gate (a DOT-style node) answered from Go.
func Example_humanGate() {
	g := switchyard.New("release").
		Agent("build", reply(func(string) string { return "v1.2.0 built" })).
		Node("approve", map[string]string{"shape": "hexagon", "label": "Ship it?"}).
		Agent("ship", reply(func(string) string { return "v1.2.0 shipped" }), switchyard.InputKey("build")).
		Agent("hold", reply(func(string) string { return "held" })).
		Chain("build", "approve").
		Edge("approve", "ship", switchyard.Label("[Y] Yes")).
		Edge("approve", "hold", switchyard.Label("[N] No"))

	answer := func(_ context.Context, q *switchyard.Question) (*switchyard.Answer, error) {
		var labels []string
		for _, o := range q.Options {
			labels = append(labels, o.Label)
		}
		fmt.Printf("%s %v\n", q.Text, labels)
		return &switchyard.Answer{Value: "Y"}, nil
	}
	rep, _ := switchyard.Run(context.Background(), g, switchyard.Message{}, switchyard.WithAnswers(answer))
	fmt.Println(rep.Result.Text)
	// Output:
	// Ship it? [[Y] Yes [N] No]
	// v1.2.0 shipped
}

// A session stopped while it waits for a person is resumed from its
// checkpoint, here in the same process (a new process works the same with
// the same data directory): the work done before is not done again.
func ExampleResume() {
	dir, _ := os.MkdirTemp("", "switchyard-example")
	defer os.RemoveAll(dir)
	var builds atomic.Int32
	g := switchyard.New("release").
		Agent("build", switchyard.AgentFunc(func(context.Context, switchyard.Message) (switchyard.Message, error) {
			builds.Add(1)
			return switchyard.Message{Text: "v2 built"}, nil
		})).
		Node("approve", map[string]string{"shape": "hexagon", "label": "Ship?"}).
		Agent("ship", reply(func(s string) string { return "shipped after " + s }), switchyard.InputKey("build")).
		Chain("build", "approve").
		Edge("approve", "ship", switchyard.Label("[Y] Yes"))

	ctx := context.Background()
	ex, _ := switchyard.Stream(ctx, g, switchyard.Message{}, switchyard.WithDataDir(dir), switchyard.WithSessionID("release-42"))
	for ev := range ex.Events() {
		if ev.Kind == "human.question" {
			break // nobody answers: stop here
		}
	}
	first := ex.Stop()
	ex.Close()
	fmt.Println("first run:", first.Status)

	rep, err := switchyard.Resume(ctx, g, "release-42", switchyard.WithDataDir(dir),
		switchyard.WithAnswers(func(context.Context, *switchyard.Question) (*switchyard.Answer, error) {
			return &switchyard.Answer{Value: "Y"}, nil
		}))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("resumed:", rep.Status, rep.Result.Text)
	fmt.Println("builds:", builds.Load())
	// Output:
	// first run: running
	// resumed: success shipped after v2 built
	// builds: 1
}
