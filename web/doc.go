// Package web is Switchyard's web view: an HTTP handler that shows the
// sessions a process runs — the graph, laid out in the browser from its
// DOT by Graphviz compiled to WebAssembly, with each node's live state,
// the delivery buffers, budgets and usage, the event log live over
// server-sent events, a node's prompt, response and status files, a
// durable session's checkpoints — and lets people answer waiting human
// gates and trigger manual nodes.
//
// Its assets (assets/) are embedded in the binary; assets/graphviz.js is
// the @hpcc-js/wasm-graphviz package's bundle, vendored by
// assets/vendor-graphviz.sh. Authentication is the program's business:
// wrap Handler (cmd/switchyard uses the NATS listener's credentials).
package web
