// Package cond is the Attractor condition language (spec section 10): clauses
// `key=value` and `key!=value` joined by `&&`. It has no dependencies so that
// both graph validation and edge selection can use it.
package cond

// Env is what a condition is evaluated against.
type Env struct {
	Outcome        string            // the outcome status (compared case-insensitively)
	PreferredLabel string            // the outcome's preferred label
	Context        map[string]string // the run context; a missing key is ""
}

// Expr is a compiled condition. The zero of *Expr (nil) is the empty
// condition, which is always true.
type Expr struct {
	src string
	// TODO(edges helper): clauses
}

// SyntaxError is a malformed condition. Offset is the 0-based byte offset in
// the condition source where the problem is.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string { return e.Msg }

// Parse compiles a condition. The empty string compiles to nil (always true).
func Parse(src string) (*Expr, error) { return &Expr{src: src}, nil }

// Eval reports whether the condition holds in env. A nil Expr is true.
func (e *Expr) Eval(env Env) bool { return e == nil }

// String returns the condition source.
func (e *Expr) String() string {
	if e == nil {
		return ""
	}
	return e.src
}
