package edges_test

import (
	"fmt"

	"github.com/switchyard/switchyard/edges"
	"github.com/switchyard/switchyard/graph"
)

func ExampleSelect() {
	g, ds := graph.New("review").
		Node("start", graph.KV{"shape": "Mdiamond"}).
		Node("check", graph.KV{"shape": "hexagon"}).
		Node("ship").Node("fix").Node("exit", graph.KV{"shape": "Msquare"}).
		Edge("start", "check").
		Edge("check", "fix", graph.KV{"condition": "outcome=fail"}).
		Edge("check", "ship", graph.KV{"label": "[S] Ship it"}).
		Edge("check", "exit", graph.KV{"label": "[A] Abandon"}).
		Edge("ship", "exit").Edge("fix", "exit").
		Build()
	if ds.HasErrors() {
		fmt.Println(ds)
		return
	}
	for _, o := range []edges.Outcome{
		{Status: "fail"}, // step 1: the condition holds
		{Status: "success", PreferredLabel: "abandon"},          // step 2: the label, without its accelerator
		{Status: "success", SuggestedNextIDs: []string{"ship"}}, // step 3
		{Status: "success"}, // steps 4 and 5: equal weights, lowest target id
	} {
		fmt.Println(edges.EdgeID(edges.Select(g, "check", o, nil)))
	}
	// Output:
	// check.fix
	// check.exit
	// check.ship
	// check.exit
}
