package graph

import (
	"fmt"
	"sort"
	"strings"
)

// Error is a positioned problem found while parsing.
type Error struct {
	Pos  Pos
	Rule string
	Msg  string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: error: %s: %s", e.Pos, e.Rule, e.Msg)
}

// ErrorList is a list of parse errors, sorted by position.
type ErrorList []*Error

func (l ErrorList) Error() string {
	switch len(l) {
	case 0:
		return "no errors"
	case 1:
		return l[0].Error()
	}
	var b strings.Builder
	for i, e := range l {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Err returns the list as an error, or nil when it is empty.
func (l ErrorList) Err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}

// Sort orders the list by position.
func (l ErrorList) Sort() {
	sort.SliceStable(l, func(i, j int) bool { return posLess(l[i].Pos, l[j].Pos) })
}

func posLess(a, b Pos) bool {
	if a.File != b.File {
		return a.File < b.File
	}
	if a.Line != b.Line {
		return a.Line < b.Line
	}
	return a.Col < b.Col
}

// Severity of a diagnostic.
type Severity int

// Severities.
const (
	SeverityError Severity = iota
	SeverityWarning
	SeverityInfo
)

func (s Severity) String() string {
	switch s {
	case SeverityError:
		return "error"
	case SeverityWarning:
		return "warning"
	}
	return "info"
}

// MarshalText renders the severity as its name.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Diagnostic is one problem in a graph: a syntax error or a lint finding.
type Diagnostic struct {
	Pos      Pos      `json:"-"`
	Severity Severity `json:"severity"`
	Rule     string   `json:"rule"`
	Message  string   `json:"message"`
	NodeID   string   `json:"node,omitempty"`
	EdgeFrom string   `json:"edge_from,omitempty"`
	EdgeTo   string   `json:"edge_to,omitempty"`
	Fix      string   `json:"fix,omitempty"`
}

// String renders FILE:LINE:COL: severity: rule: message.
func (d Diagnostic) String() string {
	pos := d.Pos.String()
	if !d.Pos.IsValid() {
		pos = d.Pos.File
		if pos == "" {
			pos = "-"
		}
	}
	s := fmt.Sprintf("%s: %s: %s: %s", pos, d.Severity, d.Rule, d.Message)
	if d.Fix != "" {
		s += " (fix: " + d.Fix + ")"
	}
	return s
}

// Diagnostics is a list of diagnostics.
type Diagnostics []Diagnostic

// HasErrors reports whether any diagnostic is an error.
func (ds Diagnostics) HasErrors() bool {
	for _, d := range ds {
		if d.Severity == SeverityError {
			return true
		}
	}
	return false
}

// Errors returns the error diagnostics.
func (ds Diagnostics) Errors() Diagnostics {
	var out Diagnostics
	for _, d := range ds {
		if d.Severity == SeverityError {
			out = append(out, d)
		}
	}
	return out
}

// Warnings returns the warning diagnostics.
func (ds Diagnostics) Warnings() Diagnostics {
	var out Diagnostics
	for _, d := range ds {
		if d.Severity == SeverityWarning {
			out = append(out, d)
		}
	}
	return out
}

// Err returns a *ValidationError holding the error diagnostics, or nil when
// there is none (the spec's validate_or_raise).
func (ds Diagnostics) Err() error {
	if errs := ds.Errors(); len(errs) > 0 {
		return &ValidationError{Diagnostics: errs}
	}
	return nil
}

// ValidationError is a graph that must not run: its error diagnostics.
type ValidationError struct {
	Diagnostics Diagnostics
}

// Error renders the diagnostics, one a line.
func (e *ValidationError) Error() string {
	return "graph: invalid graph:\n" + strings.TrimSuffix(e.Diagnostics.String(), "\n")
}

// Sort orders by position, then rule.
func (ds Diagnostics) Sort() {
	sort.SliceStable(ds, func(i, j int) bool {
		if ds[i].Pos != ds[j].Pos {
			return posLess(ds[i].Pos, ds[j].Pos)
		}
		return ds[i].Rule < ds[j].Rule
	})
}

// String renders one diagnostic a line.
func (ds Diagnostics) String() string {
	var b strings.Builder
	for _, d := range ds {
		b.WriteString(d.String())
		b.WriteByte('\n')
	}
	return b.String()
}
