// Package graph is the definition layer of Switchyard: the graph model
// (graph, nodes, edges and their attributes with positions), the parser of
// the Attractor DOT subset, the transforms run between parsing and
// validation ($goal expansion, the model stylesheet, custom transforms),
// the lint rules of the Attractor spec section 7, a builder for graphs made
// in Go, and a printer back to canonical DOT.
//
// Load is the usual entry point: it parses, transforms, compiles edge
// conditions and validates, returning every diagnostic as
// FILE:LINE:COL: error|warning: RULE: message. The package knows nothing of
// NATS, actors or handlers.
package graph
