// Package edges is how envelopes move between nodes: edge selection (the
// five steps of spec section 3.3 for pipelines, broadcast for parallel
// nodes and reactive sessions), human-choice labels and accelerator keys,
// and edge ids, which name edge subjects. The condition language is in the
// subpackage cond.
package edges
