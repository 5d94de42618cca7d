package scheduler

import (
	"errors"
	"fmt"
)

// ErrMaxIterations is the Wait.Err of a node that reached its firing cap
// (max_iterations or max_visits) or whose session reached the graph's
// max_iterations.
var ErrMaxIterations = errors.New("scheduler: max iterations reached")

// iterations counts firings per node and for the session. A firing counts
// when it is admitted (Admit), so a cycle A ⇄ B stops at the first cap it
// reaches whether or not its handlers succeed.
type iterations struct {
	node  map[string]int
	total int
}

// refusal says why node may not fire again, or ok.
func (it *iterations) check(node string, nodeMax, graphMax int) (reason string, fields map[string]string, ok bool) {
	if nodeMax > 0 && it.node[node] >= nodeMax {
		return fmt.Sprintf("node %s reached its limit of %d firings (max_iterations / max_visits)", node, nodeMax),
			map[string]string{"limit": itoa(nodeMax), "scope": "node"}, false
	}
	if graphMax > 0 && it.total >= graphMax {
		return fmt.Sprintf("the session reached its limit of %d node firings (graph max_iterations)", graphMax),
			map[string]string{"limit": itoa(graphMax), "scope": "graph"}, false
	}
	return "", nil, true
}

// count records one admitted firing of node.
func (it *iterations) count(node string) {
	it.node[node]++
	it.total++
}
