package graph

import (
	"fmt"
	"os"
)

// LoadOption configures Load and Validate.
type LoadOption func(*loadOptions)

type loadOptions struct {
	transforms []Transform
	rules      []Rule
	known      []string
	session    bool
}

// WithTransforms adds custom transforms, run in order after the built-ins.
func WithTransforms(ts ...Transform) LoadOption {
	return func(o *loadOptions) { o.transforms = append(o.transforms, ts...) }
}

// WithRules adds custom lint rules, run after the built-ins.
func WithRules(rs ...Rule) LoadOption {
	return func(o *loadOptions) { o.rules = append(o.rules, rs...) }
}

// WithKnownTypes sets the handler types the runtime has registered (for the
// type_known rule); the default is BuiltinTypes.
func WithKnownTypes(types ...string) LoadOption {
	return func(o *loadOptions) { o.known = append([]string{}, types...) }
}

// AsSession loads the graph as a reactive session (as kind="session" does).
func AsSession() LoadOption { return func(o *loadOptions) { o.session = true } }

func options(opts []LoadOption) *loadOptions {
	o := &loadOptions{}
	for _, f := range opts {
		f(o)
	}
	return o
}

// LoadFile loads the DOT file at path.
func LoadFile(path string, opts ...LoadOption) (*Graph, Diagnostics) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, Diagnostics{{Pos: Pos{File: path}, Severity: SeverityError, Rule: "read", Message: err.Error()}}
	}
	return Load(path, src, opts...)
}

// Load parses src, runs the transforms ($goal expansion, the stylesheet,
// then custom ones), compiles the edge conditions and validates the graph.
// It returns the graph (nil when it could not be parsed) and every
// diagnostic, sorted by position. A graph with error diagnostics must not
// run.
func Load(filename string, src []byte, opts ...LoadOption) (*Graph, Diagnostics) {
	g, err := Parse(filename, src)
	if err != nil {
		var ds Diagnostics
		if list, ok := err.(ErrorList); ok {
			for _, e := range list {
				ds = append(ds, Diagnostic{Pos: e.Pos, Severity: SeverityError, Rule: e.Rule, Message: e.Msg})
			}
		} else {
			ds = Diagnostics{{Pos: Pos{File: filename}, Severity: SeverityError, Rule: "read", Message: err.Error()}}
		}
		return nil, ds
	}
	return g, prepare(g, options(opts))
}

// prepare runs the transforms and the rules.
func prepare(g *Graph, o *loadOptions) Diagnostics {
	if o.session && g.Kind() != "session" {
		g.Attrs["kind"] = Value{Text: "session", Kind: KindString}
	}
	var ds Diagnostics
	for _, t := range append([]Transform{GoalExpansion, Stylesheet}, o.transforms...) {
		ds = append(ds, t.Apply(g)...)
	}
	g.reindex() // transforms may have changed the nodes; readers share the index
	ds = append(ds, validate(g, o)...)
	ds.Sort()
	return ds
}

// Validate runs the lint rules (built-in, then custom) and returns every
// diagnostic. It also compiles the edge conditions.
func Validate(g *Graph, opts ...LoadOption) Diagnostics {
	o := options(opts)
	if o.session && g.Kind() != "session" {
		g.Attrs["kind"] = Value{Text: "session", Kind: KindString}
	}
	ds := validate(g, o)
	ds.Sort()
	return ds
}

func validate(g *Graph, o *loadOptions) Diagnostics {
	var ds Diagnostics
	for _, r := range append(BuiltinRules(o.known), o.rules...) {
		found := r.Check(g)
		for i := range found {
			d := &found[i]
			if d.Pos.File == "" {
				d.Pos.File = g.Pos.File
			}
			if d.Rule == "" {
				d.Rule = r.Name()
			}
		}
		ds = append(ds, capDiagnostics(found, r.Name())...)
	}
	return ds
}

// capDiagnostics keeps the first maxDiagnosticsPerRule diagnostics of a
// rule (by position) and counts the rest in one more, at the first one
// left out: a hostile file with 100,000 faults gets a readable answer.
func capDiagnostics(ds Diagnostics, rule string) Diagnostics {
	if len(ds) <= maxDiagnosticsPerRule+1 { // a rule may have capped itself
		return ds
	}
	ds.Sort()
	rest := ds[maxDiagnosticsPerRule:]
	sev := SeverityWarning
	for _, d := range rest {
		if d.Severity == SeverityError {
			sev = SeverityError
			break
		}
	}
	return append(ds[:maxDiagnosticsPerRule:maxDiagnosticsPerRule], moreDiagnostics(rest[0].Pos, sev, rest[0].Rule, len(rest)))
}

// moreDiagnostics counts the n diagnostics of rule left out, the first at
// pos.
func moreDiagnostics(pos Pos, sev Severity, rule string, n int) Diagnostic {
	return Diagnostic{Pos: pos, Severity: sev, Rule: rule,
		Message: fmt.Sprintf("%d more %s diagnostics not shown (at most %d per rule)", n, rule, maxDiagnosticsPerRule)}
}
