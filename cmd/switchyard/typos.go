package main

import (
	"fmt"
	"strings"

	"github.com/switchyard/switchyard/edges"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/nodes"
)

// checkTypos refuses, before anything runs, what names nothing in the
// graph: a --mock script key that is no node, an --answer for a node that
// is not a human gate of the graph, an answer that matches none of the
// gate's options. Each says what it could have meant.
func checkTypos(g *graph.Graph, mockNodes []string, answers map[string][]string) error {
	ids := make([]string, 0, len(g.Nodes))
	var gates []string
	for _, n := range g.Nodes {
		ids = append(ids, n.ID)
		if g.HandlerType(n) == graph.TypeHuman {
			gates = append(gates, n.ID)
		}
	}
	var problems []string
	for _, key := range mockNodes {
		if g.Node(key) == nil {
			problems = append(problems, fmt.Sprintf("--mock: the script names node %q, which is not in graph %s%s", key, g.Name, didYouMean(key, ids)))
		}
	}
	for _, node := range sortedKeys(answers) {
		n := g.Node(node)
		switch {
		case n == nil:
			problems = append(problems, fmt.Sprintf("--answer %s=...: no node %q in graph %s%s", node, node, g.Name, didYouMean(node, gates)))
			continue
		case g.HandlerType(n) != graph.TypeHuman:
			problems = append(problems, fmt.Sprintf("--answer %s=...: node %s is not a human gate (its human gates: %s)", node, node, orNone(gates)))
			continue
		}
		qt, ok := nodes.ParseQuestionType(n.Attrs.String("human.question_type"))
		if !ok {
			continue // the gate itself fails, saying why
		}
		opts := nodes.Choices(g, node)
		var names []string
		for _, o := range opts {
			_, bare := edges.Accelerator(o.Label)
			names = append(names, o.Key, o.Label, strings.TrimSpace(bare), o.Target)
		}
		for _, choice := range answers[node] {
			if err := nodes.CheckAnswer(node, qt, opts, choice); err != nil {
				problems = append(problems, fmt.Sprintf("--answer %s=%s: %v%s", node, choice, err, didYouMean(choice, names)))
			}
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "\n"))
	}
	return nil
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ", ")
}
