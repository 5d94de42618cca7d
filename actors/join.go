package actors

import "github.com/switchyard/switchyard/graph"

// joinNodes finds, for every parallel node, the fan-in node where its
// branches meet (DESIGN decision 6): the node named by the parallel node's
// `join` attribute, else the nearest fan-in node that every branch reaches
// (smallest worst-case distance, then id).
func joinNodes(g *graph.Graph) map[string]string {
	out := map[string]string{}
	for _, n := range g.Nodes {
		if g.HandlerType(n) != graph.TypeParallel {
			continue
		}
		if j := n.Attrs.String("join"); j != "" && g.Node(j) != nil {
			out[n.ID] = j
			continue
		}
		branches := g.Outgoing(n.ID)
		if len(branches) == 0 {
			continue
		}
		worst := map[string]int{}
		reachedBy := map[string]int{}
		for _, e := range branches {
			for id, d := range distances(g, e.To, n.ID) {
				if g.HandlerType(g.Node(id)) != graph.TypeFanIn {
					continue
				}
				reachedBy[id]++
				if d > worst[id] {
					worst[id] = d
				}
			}
		}
		best := ""
		for id, c := range reachedBy {
			if c != len(branches) {
				continue
			}
			if best == "" || worst[id] < worst[best] || (worst[id] == worst[best] && id < best) {
				best = id
			}
		}
		if best != "" {
			out[n.ID] = best
		}
	}
	return out
}

// distances is a breadth-first search from start that does not pass
// through stop.
func distances(g *graph.Graph, start, stop string) map[string]int {
	dist := map[string]int{start: 0}
	queue := []string{start}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		if g.Node(id) != nil && g.HandlerType(g.Node(id)) == graph.TypeFanIn {
			continue // branches stop at the first fan-in they reach
		}
		for _, e := range g.Outgoing(id) {
			if e.To == stop {
				continue
			}
			if _, seen := dist[e.To]; !seen {
				dist[e.To] = dist[id] + 1
				queue = append(queue, e.To)
			}
		}
	}
	return dist
}
