package graph

// Limits of what Parse accepts. A DOT file may come from anyone (a file
// handed to validate or run, a live edit sent to a served session), so
// parsing and validating are linear in the file's size, and a file beyond
// one of these limits is refused early with an error naming the limit
// (rule max_file_size, max_subgraph_depth, max_nodes or max_edges).
const (
	// MaxFileSize is the largest DOT source, in bytes.
	MaxFileSize = 32 << 20
	// MaxSubgraphDepth is how deep subgraphs may nest.
	MaxSubgraphDepth = 100
	// MaxNodes is the most nodes a graph may have (declared, or used by
	// edges).
	MaxNodes = 250_000
	// MaxEdges is the most edges a graph may have.
	MaxEdges = 1_000_000
)

// maxDiagnosticsPerRule is how many diagnostics of one rule validation
// reports; the rest are counted in one more diagnostic of that rule.
const maxDiagnosticsPerRule = 100

// The limits the parser applies: the constants, lowered by tests.
var (
	maxNodes = MaxNodes
	maxEdges = MaxEdges
)
