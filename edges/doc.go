// Package edges is how envelopes move along edges between nodes.
//
// Routing: Select is the five steps of spec section 3.3 by which a pipeline
// node picks one outgoing edge (conditions, preferred label, suggested ids,
// weight, target id); Broadcast is the policy of parallel nodes and reactive
// sessions, every edge whose condition holds. Match is step 1 alone (for
// failure routing) and Holds evaluates one edge. Labels of human choices
// are read with Accelerator and compared with NormalizeLabel. EdgeID names
// an edge in its subject.
//
// Delivery: each incoming edge of a node has a Buffer whose Mode (the edge
// attribute delivery, read by Delivery) decides what is kept until the node
// takes it: QueueBuffer keeps everything, LatestBuffer only the newest,
// DebounceBuffer the newest once the edge has been quiet for its window.
// Buffers are safe for concurrent use and checkpoint through Pending and
// Restore. The conformance suite every buffer passes is package edgetest.
//
// The condition language itself is the subpackage cond.
package edges
