// Package graph is the definition layer of Switchyard: the graph model
// (graph, nodes, edges and their attributes with positions), the parser of
// the Attractor DOT subset, the transforms run between parsing and
// validation ($goal expansion, the model stylesheet, custom transforms),
// the lint rules of the Attractor spec section 7, a builder for graphs made
// in Go, and a printer back to canonical DOT.
//
// Load is the usual entry point: it parses, transforms, compiles edge
// conditions and validates, returning the graph and every diagnostic as
// FILE:LINE:COL: error|warning: RULE: message. Its options are
// [WithTransforms], [WithRules], [WithKnownTypes] and [AsSession]; the same
// options serve [Validate] and [Builder.Build]. [Parse] alone returns the
// syntax errors as an [ErrorList]. A graph whose diagnostics hold an error
// ([Diagnostics.HasErrors], [Diagnostics.Err]) must not run.
//
// The attributes Switchyard reads are listed, with scope, type and
// default, by [Attributes]; typed accessors such as [Node.MaxRetries],
// [Node.Timeout], [Edge.Delivery] and [Graph.MaxVisits] apply the
// defaults. Attributes outside the table are kept verbatim for custom
// handlers.
//
// A loaded Graph is not safe for concurrent mutation; once loaded it is
// only read, and any number of goroutines may read it. The package knows
// nothing of NATS, actors or handlers.
package graph
