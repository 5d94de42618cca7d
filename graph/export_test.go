package graph

// SetLimitsForTest lowers the node and edge limits and returns what
// restores them (tests of the limits, without a million edges).
func SetLimitsForTest(nodes, edges int) (restore func()) {
	n, e := maxNodes, maxEdges
	maxNodes, maxEdges = nodes, edges
	return func() { maxNodes, maxEdges = n, e }
}
