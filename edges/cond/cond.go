package cond

import (
	"strconv"
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

type keyKind uint8

const (
	keyContext keyKind = iota // any other key: read from the context
	keyOutcome
	keyLabel
)

type clause struct {
	kind  keyKind
	key   string // the key as written
	short string // for context.<path>: <path>, tried when the full key is missing
	op    op
	value string
}

// Expr is a compiled condition. A nil *Expr is the empty condition: true.
// An Expr is immutable and safe for concurrent use.
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

// Error returns the message alone: callers that know where the condition
// sits in a file turn Offset into a line and column.
func (e *SyntaxError) Error() string { return e.Msg }

// Parse compiles a condition. The empty (or blank) string compiles to a nil
// *Expr, which is true. A malformed condition is a *SyntaxError.
func Parse(src string) (*Expr, error) {
	p := parser{src: src}
	p.space()
	if p.eof() {
		return nil, nil
	}
	e := &Expr{src: src}
	for {
		c, err := p.clause()
		if err != nil {
			return nil, err
		}
		e.clauses = append(e.clauses, c)
		if p.eof() {
			return e, nil
		}
		p.pos += 2 // clause stops only at the end or at "&&"
	}
}

// parser scans a condition left to right; quoted values may hold any text,
// including "&&", "=" and "!=".
const errOr = "unsupported operator ||: conditions use =, != and &&"

type parser struct {
	src string
	pos int
}

func (p *parser) eof() bool { return p.pos >= len(p.src) }

func (p *parser) at(s string) bool { return strings.HasPrefix(p.src[p.pos:], s) }

func (p *parser) space() {
	for !p.eof() && (p.src[p.pos] == ' ' || p.src[p.pos] == '\t' || p.src[p.pos] == '\n' || p.src[p.pos] == '\r') {
		p.pos++
	}
}

func (p *parser) fail(off int, msg string) error { return &SyntaxError{Offset: off, Msg: msg} }

func isKeyByte(b byte) bool {
	return b == '_' || b == '.' || b == '-' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}

// clause reads `key`, `key=value` or `key!=value` and stops at the end of
// the source or at the "&&" that follows.
func (p *parser) clause() (clause, error) {
	var c clause
	begin := p.pos
	p.space()
	start := p.pos
	if p.eof() || p.at("&&") {
		return c, p.fail(begin, "empty clause: expected key=value, key!=value or key between &&")
	}
	for !p.eof() && isKeyByte(p.src[p.pos]) {
		p.pos++
	}
	key := p.src[start:p.pos]
	if key == "" {
		switch ch := p.src[p.pos]; {
		case ch == '=' || p.at("!="):
			return c, p.fail(start, "missing key before the operator")
		case ch == '!':
			return c, p.fail(start, "negation with ! is not supported: use key!=value")
		case p.at("||"):
			return c, p.fail(start, errOr)
		default:
			return c, p.fail(start, "unexpected character "+strconv.QuoteRune(rune(ch))+": expected a key")
		}
	}
	if err := p.checkKey(key, start); err != nil {
		return c, err
	}
	c.key = key
	switch {
	case key == "outcome":
		c.kind = keyOutcome
	case key == "preferred_label":
		c.kind = keyLabel
	default:
		c.kind = keyContext
		c.short, _ = strings.CutPrefix(key, "context.")
	}
	p.space()
	switch {
	case p.eof() || p.at("&&"):
		c.op = opTruthy
		return c, nil
	case p.at("=="):
		return c, p.fail(p.pos, "unsupported operator ==: conditions use =, != and &&")
	case p.at("!="):
		c.op = opNe
		p.pos += 2
	case p.at("="):
		c.op = opEq
		p.pos++
	case p.at("!"):
		return c, p.fail(p.pos, "dangling !: expected !=")
	case p.at("||"):
		return c, p.fail(p.pos, errOr)
	case isKeyByte(p.src[p.pos]):
		return c, p.fail(start+len(key), "key "+strconv.Quote(key+" "+p.word())+" contains a space")
	default:
		return c, p.fail(p.pos, "unexpected character "+strconv.QuoteRune(rune(p.src[p.pos]))+" after key "+key)
	}
	v, err := p.value()
	if err != nil {
		return c, err
	}
	c.value = v
	return c, nil
}

// word is the run of key bytes at the position (for messages).
func (p *parser) word() string {
	i := p.pos
	for i < len(p.src) && isKeyByte(p.src[i]) {
		i++
	}
	return p.src[p.pos:i]
}

// checkKey rejects empty path segments: "context.", ".x", "a..b".
func (p *parser) checkKey(key string, start int) error {
	seg := 0 // start of the current segment
	for i := 0; i <= len(key); i++ {
		if i < len(key) && key[i] != '.' {
			continue
		}
		if i == seg {
			return p.fail(start+i, "empty key segment in "+strconv.Quote(key))
		}
		seg = i + 1
	}
	return nil
}

// value reads a quoted or bare literal after the operator.
func (p *parser) value() (string, error) {
	p.space()
	if p.at(`"`) {
		return p.quoted()
	}
	start := p.pos
	for !p.eof() && !p.at("&&") {
		switch {
		case p.at("||"):
			return "", p.fail(p.pos, errOr)
		case p.src[p.pos] == '"':
			return "", p.fail(p.pos, `unexpected " inside a bare value: quote the whole value`)
		case p.src[p.pos] == '=':
			return "", p.fail(p.pos, "unexpected = inside a value: quote the value if it holds =")
		}
		p.pos++
	}
	return strings.TrimRight(p.src[start:p.pos], " \t\r\n"), nil
}

// quoted reads "..." with the escapes \" and \\ (any other backslash is
// kept as written), then expects the end or "&&".
func (p *parser) quoted() (string, error) {
	open := p.pos
	p.pos++
	var b strings.Builder
	for !p.eof() {
		ch := p.src[p.pos]
		switch {
		case ch == '\\' && p.pos+1 < len(p.src) && (p.src[p.pos+1] == '"' || p.src[p.pos+1] == '\\'):
			b.WriteByte(p.src[p.pos+1])
			p.pos += 2
			continue
		case ch == '"':
			p.pos++
			p.space()
			if !p.eof() && !p.at("&&") {
				return "", p.fail(p.pos, "unexpected text after a quoted value: expected && or the end")
			}
			return b.String(), nil
		}
		b.WriteByte(ch)
		p.pos++
	}
	return "", p.fail(open, "unterminated quoted value")
}

// Eval reports whether the condition holds in env. A nil Expr is true.
// Eval does not allocate.
func (e *Expr) Eval(env Env) bool {
	if e == nil {
		return true
	}
	for i := range e.clauses {
		c := &e.clauses[i]
		var ok bool
		switch c.op {
		case opTruthy:
			v := c.resolve(env)
			ok = v != "" && v != "false" && v != "0"
		case opEq:
			ok = c.equal(env)
		case opNe:
			ok = !c.equal(env)
		}
		if !ok {
			return false
		}
	}
	return true
}

func (c *clause) equal(env Env) bool {
	if c.kind == keyOutcome {
		return strings.EqualFold(env.Outcome, c.value)
	}
	return c.resolve(env) == c.value
}

// resolve is spec 10.4: outcome, preferred_label, then the context (the
// full key, then for context.<path> the path alone); missing is "".
func (c *clause) resolve(env Env) string {
	switch c.kind {
	case keyOutcome:
		return env.Outcome
	case keyLabel:
		return env.PreferredLabel
	}
	if v, ok := env.Context[c.key]; ok {
		return v
	}
	if c.short != c.key {
		return env.Context[c.short]
	}
	return ""
}

// String returns the condition source as written.
func (e *Expr) String() string {
	if e == nil {
		return ""
	}
	return e.src
}
