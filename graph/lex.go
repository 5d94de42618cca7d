package graph

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// tokKind is the kind of a lexical token.
type tokKind uint8

const (
	tEOF        tokKind = iota
	tWord               // identifiers, keywords, numbers, durations, bare values, dotted keys
	tString             // "quoted" (Text holds the decoded value)
	tLBrace             // {
	tRBrace             // }
	tLBrack             // [
	tRBrack             // ]
	tEq                 // =
	tComma              // ,
	tSemi               // ;
	tArrow              // ->
	tUndirected         // --
	tColon              // : (Graphviz ports; rejected by the parser)
	tError              // a lexical error (Text holds the message, Rule the rule)
)

func (k tokKind) String() string {
	return [...]string{"end of file", "word", "string", "'{'", "'}'", "'['", "']'", "'='", "','", "';'", "'->'", "'--'", "':'", "error"}[k]
}

type token struct {
	kind tokKind
	text string
	rule string // for tError
	raw  string // tString: the source between the quotes
	pos  Pos
}

// lexer turns DOT source into tokens, tracking line and column (columns
// count characters, 1-based). It never panics and always terminates: every
// step consumes at least one byte or returns EOF.
type lexer struct {
	file string
	src  string
	off  int
	line int
	col  int
}

func newLexer(file, src string) *lexer { return &lexer{file: file, src: src, line: 1, col: 1} }

func (l *lexer) pos() Pos { return Pos{File: l.file, Line: l.line, Col: l.col} }

func (l *lexer) peekByte(n int) byte {
	if l.off+n < len(l.src) {
		return l.src[l.off+n]
	}
	return 0
}

// advance consumes one character.
func (l *lexer) advance() {
	if l.off >= len(l.src) {
		return
	}
	r, size := utf8.DecodeRuneInString(l.src[l.off:])
	l.off += size
	if r == '\n' {
		l.line++
		l.col = 1
	} else {
		l.col++
	}
}

func isWordStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

func isWordByte(c byte) bool { return isWordStart(c) || c == '.' || c == ':' || c == '-' || c == '+' }

// next returns the next token.
func (l *lexer) next() token {
	for {
		// whitespace and comments
		for l.off < len(l.src) {
			c := l.src[l.off]
			if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' {
				l.advance()
				continue
			}
			break
		}
		if l.off >= len(l.src) {
			return token{kind: tEOF, pos: l.pos()}
		}
		c := l.src[l.off]
		if c == '/' && l.peekByte(1) == '/' || c == '#' && l.col == 1 {
			for l.off < len(l.src) && l.src[l.off] != '\n' {
				l.advance()
			}
			continue
		}
		if c == '/' && l.peekByte(1) == '*' {
			start := l.pos()
			l.advance()
			l.advance()
			for {
				if l.off >= len(l.src) {
					return token{kind: tError, rule: "unterminated_comment", text: "comment opened here is never closed with */", pos: start}
				}
				if l.src[l.off] == '*' && l.peekByte(1) == '/' {
					l.advance()
					l.advance()
					break
				}
				l.advance()
			}
			continue
		}
		break
	}
	p := l.pos()
	c := l.src[l.off]
	if k := punct(c); k != tEOF {
		l.advance()
		return token{kind: k, text: l.src[l.off-1 : l.off], pos: p}
	}
	switch {
	case c == '-' && l.peekByte(1) == '>':
		l.advance()
		l.advance()
		return token{kind: tArrow, text: "->", pos: p}
	case c == '-' && l.peekByte(1) == '-':
		l.advance()
		l.advance()
		return token{kind: tUndirected, text: "--", pos: p}
	case c == '"':
		return l.lexString(p)
	case c == ':':
		l.advance()
		return token{kind: tColon, text: ":", pos: p}
	case c == '<':
		return l.lexHTML(p)
	case isWordStart(c) || (c == '-' || c == '+' || c == '.') && l.off+1 < len(l.src) && (l.src[l.off+1] >= '0' && l.src[l.off+1] <= '9' || l.src[l.off+1] == '.'):
		start := l.off
		l.advance()
		for l.off < len(l.src) && isWordByte(l.src[l.off]) {
			if l.src[l.off] == '-' && (l.peekByte(1) == '>' || l.peekByte(1) == '-') {
				break
			}
			l.advance()
		}
		return token{kind: tWord, text: l.src[start:l.off], pos: p}
	}
	r, _ := utf8.DecodeRuneInString(l.src[l.off:])
	l.advance()
	return token{kind: tError, rule: "syntax", text: "unexpected character " + quoteChar(r), pos: p}
}

// punct returns the kind of a one-character token, or tEOF.
func punct(c byte) tokKind {
	switch c {
	case '{':
		return tLBrace
	case '}':
		return tRBrace
	case '[':
		return tLBrack
	case ']':
		return tRBrack
	case '=':
		return tEq
	case ',':
		return tComma
	case ';':
		return tSemi
	}
	return tEOF
}

func quoteChar(r rune) string {
	if r < 0x20 || r == 0x7f || r == utf8.RuneError {
		return fmt.Sprintf("%U", r)
	}
	return "'" + string(r) + "'"
}

// lexString reads a quoted string; escapes \" \n \t \\ are decoded (spec
// 2.4), and Graphviz's \l and \r label escapes are read as newlines.
func (l *lexer) lexString(p Pos) token {
	l.advance() // opening quote
	start := l.off
	var b strings.Builder
	for {
		if l.off >= len(l.src) {
			return token{kind: tError, rule: "unterminated_string", text: "string opened here is never closed", pos: p}
		}
		c := l.src[l.off]
		switch c {
		case '"':
			l.advance()
			return token{kind: tString, text: b.String(), raw: l.src[start : l.off-1], pos: p}
		case '\\':
			ep := l.pos()
			l.advance()
			if l.off >= len(l.src) {
				return token{kind: tError, rule: "unterminated_string", text: "string opened here is never closed", pos: p}
			}
			e := l.src[l.off]
			switch e {
			case '"', '\\':
				b.WriteByte(e)
			case 'n', 'l', 'r':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case '\n':
				// a backslash-newline continues the string
			default:
				r, _ := utf8.DecodeRuneInString(l.src[l.off:])
				l.advance()
				// keep going to the end of the string so the error is the only one
				for l.off < len(l.src) && l.src[l.off] != '"' {
					if l.src[l.off] == '\\' {
						l.advance()
					}
					l.advance()
				}
				l.advance()
				// The string is still a string: the parser reports the escape
				// and goes on, so one mistake makes one error.
				return token{kind: tString, rule: "unknown_escape", text: `unknown escape \` + string(r) + ` in string (use \" \n \t or \\)`, pos: ep}
			}
			l.advance()
		default:
			_, size := utf8.DecodeRuneInString(l.src[l.off:])
			b.WriteString(l.src[l.off : l.off+size])
			l.advance()
		}
	}
}

// lexHTML skips a Graphviz HTML label <...> (nested angle brackets
// included) and returns it as a string carrying one html_label error, so a
// label written for Graphviz costs one error, not one per character.
func (l *lexer) lexHTML(p Pos) token {
	start := l.off
	depth := 0
	for l.off < len(l.src) {
		c := l.src[l.off]
		l.advance()
		switch c {
		case '<':
			depth++
		case '>':
			depth--
			if depth == 0 {
				return token{kind: tString, rule: "html_label", text: "HTML labels (<...>) are not supported: use a quoted string", raw: l.src[start:l.off], pos: p}
			}
		}
	}
	return token{kind: tError, rule: "unterminated_string", text: "HTML label opened here is never closed with '>'", pos: p}
}
