// Package cond is the Attractor condition language (spec section 10):
// clauses `key=value`, `key!=value` or a bare `key` (truthy), joined by
// `&&`. Keys are `outcome`, `preferred_label` and `context.<path>`; any
// other key reads the context. A missing key is the empty string. Values
// are compared exactly, except outcome statuses, which are compared
// case-insensitively. The empty condition is true.
//
// It has no dependencies, so that graph validation and edge selection can
// both use it. Conditions are compiled once (Parse) and evaluated many times.
package cond

import (
	"strings"
)

// Env is what a condition is evaluated against.
type Env struct {
	Outcome        string            // the outcome status
	PreferredLabel string            // the outcome's preferred label
	Context        map[string]string // the run context; a missing key is ""
}

type op uint8

const (
	opEq op = iota
	opNe
	opTruthy
)

type clause struct {
	key   string
	op    op
	value string
}

// Expr is a compiled condition. A nil *Expr is the empty condition: true.
type Expr struct {
	src     string
	clauses []clause
}

// SyntaxError is a malformed condition. Offset is the 0-based byte offset
// in the condition source where the problem is.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string { return e.Msg }

// Parse compiles a condition. The empty (or blank) string compiles to nil.
func Parse(src string) (*Expr, error) {
	if strings.TrimSpace(src) == "" {
		return nil, nil
	}
	e := &Expr{src: src}
	off := 0
	for {
		i := strings.Index(src[off:], "&&")
		end := len(src)
		if i >= 0 {
			end = off + i
		}
		c, err := parseClause(src, off, end)
		if err != nil {
			return nil, err
		}
		e.clauses = append(e.clauses, c)
		if i < 0 {
			break
		}
		off = end + 2
	}
	return e, nil
}

func parseClause(src string, start, end int) (clause, error) {
	part := src[start:end]
	lead := len(part) - len(strings.TrimLeft(part, " \t"))
	text := strings.TrimSpace(part)
	pos := start + lead
	if text == "" {
		return clause{}, &SyntaxError{Offset: start, Msg: "empty clause: expected key=value, key!=value or key between &&"}
	}
	for _, bad := range []string{"||", "=="} {
		if i := strings.Index(text, bad); i >= 0 {
			return clause{}, &SyntaxError{Offset: pos + i, Msg: "unsupported operator " + bad + ": conditions use =, != and &&"}
		}
	}
	var c clause
	var keyText, valText string
	valPos := 0
	if i := strings.Index(text, "!="); i >= 0 {
		c.op, keyText, valText, valPos = opNe, text[:i], text[i+2:], pos+i+2
	} else if i := strings.IndexByte(text, '='); i >= 0 {
		c.op, keyText, valText, valPos = opEq, text[:i], text[i+1:], pos+i+1
	} else {
		c.op, keyText = opTruthy, text
	}
	key := strings.TrimSpace(keyText)
	if key == "" {
		return clause{}, &SyntaxError{Offset: pos, Msg: "missing key before the operator"}
	}
	if strings.HasPrefix(key, "!") {
		return clause{}, &SyntaxError{Offset: pos, Msg: "negation with ! is not supported: use key!=value"}
	}
	for i, r := range key {
		if !(r == '_' || r == '.' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return clause{}, &SyntaxError{Offset: pos + i, Msg: "invalid character " + quoteRune(r) + " in key " + strings.TrimSpace(keyText)}
		}
	}
	if key == "context." || strings.HasSuffix(key, ".") || strings.HasPrefix(key, ".") {
		return clause{}, &SyntaxError{Offset: pos, Msg: "incomplete key " + key}
	}
	c.key = key
	if c.op != opTruthy {
		v, err := parseValue(valText, valPos)
		if err != nil {
			return clause{}, err
		}
		c.value = v
		if c.key == "outcome" {
			c.value = strings.ToLower(c.value)
		}
	}
	return c, nil
}

func parseValue(raw string, pos int) (string, error) {
	lead := len(raw) - len(strings.TrimLeft(raw, " \t"))
	v := strings.TrimSpace(raw)
	pos += lead
	if !strings.HasPrefix(v, `"`) {
		if strings.ContainsAny(v, `"=!`) {
			return "", &SyntaxError{Offset: pos, Msg: "unexpected character in value " + v}
		}
		return v, nil
	}
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		switch ch := v[i]; ch {
		case '\\':
			if i+1 >= len(v) {
				return "", &SyntaxError{Offset: pos + i, Msg: "unterminated escape in quoted value"}
			}
			i++
			switch v[i] {
			case '"', '\\':
				b.WriteByte(v[i])
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			default:
				return "", &SyntaxError{Offset: pos + i - 1, Msg: `unknown escape \` + string(v[i]) + ` in quoted value`}
			}
		case '"':
			if rest := strings.TrimSpace(v[i+1:]); rest != "" {
				return "", &SyntaxError{Offset: pos + i + 1, Msg: "unexpected text after quoted value: " + rest}
			}
			return b.String(), nil
		default:
			b.WriteByte(ch)
		}
	}
	return "", &SyntaxError{Offset: pos, Msg: "unterminated quoted value"}
}

func quoteRune(r rune) string { return "'" + string(r) + "'" }

// Eval reports whether the condition holds in env. A nil Expr is true.
func (e *Expr) Eval(env Env) bool {
	if e == nil {
		return true
	}
	for _, c := range e.clauses {
		v := resolve(c.key, env)
		var ok bool
		switch c.op {
		case opTruthy:
			ok = v != "" && v != "false" && v != "0"
		case opEq:
			ok = v == c.value
		case opNe:
			ok = v != c.value
		}
		if !ok {
			return false
		}
	}
	return true
}

func resolve(key string, env Env) string {
	switch key {
	case "outcome":
		return strings.ToLower(env.Outcome)
	case "preferred_label":
		return env.PreferredLabel
	}
	if v, ok := env.Context[key]; ok {
		return v
	}
	if rest, ok := strings.CutPrefix(key, "context."); ok {
		return env.Context[rest]
	}
	return ""
}

// String returns the condition source.
func (e *Expr) String() string {
	if e == nil {
		return ""
	}
	return e.src
}
