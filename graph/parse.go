package graph

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxErrors stops parsing after this many errors.
const maxErrors = 20

var (
	keyRE      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)
	intRE      = regexp.MustCompile(`^[-+]?[0-9]+$`)
	floatRE    = regexp.MustCompile(`^[-+]?([0-9]+\.[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$`)
	durationRE = regexp.MustCompile(`^[0-9]+(ms|s|m|h|d)$`)
	bareRE     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.:-]*$`)
	// durationLikeRE: what a person meant as a duration (1.5h, -5s, 10 ms).
	durationLikeRE = regexp.MustCompile(`^[-+]?[0-9]*\.?[0-9]+(ms|s|m|h|d)$`)
)

// isKeyword reports whether s is one of DOT's keywords (any case), which
// cannot be node ids.
func isKeyword(s string) bool {
	switch strings.ToLower(s) {
	case "graph", "digraph", "subgraph", "node", "edge", "strict":
		return true
	}
	return false
}

// IsIdentifier reports whether s is a valid node id: [A-Za-z_][A-Za-z0-9_]*.
func IsIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// ParseFile parses the DOT file at path.
func ParseFile(path string) (*Graph, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, src)
}

// Parse reads one digraph in the Attractor DOT subset. The error, if any,
// is an ErrorList of positioned errors. Parse never panics.
func Parse(filename string, src []byte) (*Graph, error) {
	if len(src) > MaxFileSize {
		return nil, ErrorList{{Pos: Pos{File: filename, Line: 1, Col: 1}, Rule: "max_file_size",
			Msg: fmt.Sprintf("the file has %d bytes: more than the limit of %d (MaxFileSize)", len(src), MaxFileSize)}}
	}
	if len(bytes.TrimSpace(src)) == 0 {
		return nil, ErrorList{{Pos: Pos{File: filename, Line: 1, Col: 1}, Rule: "empty_input", Msg: "the file is empty: expected digraph NAME { ... }"}}
	}
	if bytes.IndexByte(src, 0) >= 0 || !utf8.Valid(src) {
		line, col := 1, 1
		for i := 0; i < len(src); {
			r, size := utf8.DecodeRune(src[i:])
			if r == 0 || r == utf8.RuneError && size == 1 {
				break
			}
			if r == '\n' {
				line, col = line+1, 1
			} else {
				col++
			}
			i += size
		}
		return nil, ErrorList{{Pos: Pos{File: filename, Line: line, Col: col}, Rule: "binary_input", Msg: "the file is not UTF-8 text"}}
	}
	p := &parser{lex: newLexer(filename, string(src)), file: filename}
	g := p.parseFile()
	if len(p.errs) > 0 {
		p.errs.Sort()
		return nil, p.errs
	}
	return g, nil
}

type parser struct {
	lex  *lexer
	file string
	tok  token
	errs ErrorList
	g    *Graph

	declared map[string]bool // nodes declared by a node statement
	refs     []nodeRef       // nodes referenced by edges
	depth    int             // subgraphs open
}

type nodeRef struct {
	id  string
	pos Pos
}

// scope holds the defaults and classes in force inside a graph or subgraph.
type scope struct {
	nodeDefaults Attrs
	edgeDefaults Attrs
	classes      []string
	subgraphs    []*Subgraph // the enclosing subgraphs, outermost first
}

func (s *scope) child() *scope {
	return &scope{nodeDefaults: s.nodeDefaults.Clone(), edgeDefaults: s.edgeDefaults.Clone(),
		classes: append([]string(nil), s.classes...), subgraphs: append([]*Subgraph(nil), s.subgraphs...)}
}

type bailout struct{}

func (p *parser) next() {
	for {
		p.tok = p.lex.next()
		switch {
		case p.tok.kind == tString && p.tok.rule != "":
			// a string with a bad escape: report it, keep the string
			p.errorf(p.tok.pos, p.tok.rule, "%s", p.tok.text)
			p.tok.text, p.tok.rule = "", ""
			return
		case p.tok.kind != tError:
			return
		}
		p.errorf(p.tok.pos, p.tok.rule, "%s", p.tok.text)
		if strings.HasPrefix(p.tok.rule, "unterminated_") {
			panic(bailout{}) // the rest of the file was swallowed: nothing more to say
		}
	}
}

func (p *parser) errorf(pos Pos, rule, format string, args ...any) {
	p.errs = append(p.errs, &Error{Pos: pos, Rule: rule, Msg: fmt.Sprintf(format, args...)})
	if len(p.errs) >= maxErrors {
		panic(bailout{})
	}
}

func describe(t token) string {
	switch t.kind {
	case tWord:
		return strconv.Quote(t.text)
	case tString:
		return "string " + strconv.Quote(t.text)
	}
	return t.kind.String()
}

func (p *parser) expect(k tokKind, context string) token {
	t := p.tok
	if t.kind != k {
		p.errorf(t.pos, "syntax", "expected %s %s, found %s", k, context, describe(t))
		panic(bailout{})
	}
	p.next()
	return t
}

func (p *parser) parseFile() (g *Graph) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(bailout); !ok {
				panic(r)
			}
			g = nil
		}
	}()
	p.next()
	p.g = &Graph{Attrs: Attrs{}, Pos: p.tok.pos}
	p.declared = map[string]bool{}
	if p.tok.kind == tWord && strings.EqualFold(p.tok.text, "strict") {
		p.errorf(p.tok.pos, "strict_graph", "strict graphs are not supported: remove 'strict'")
		p.next()
	}
	switch {
	case p.tok.kind == tWord && p.tok.text == "digraph":
		p.next()
	case p.tok.kind == tWord && p.tok.text == "graph":
		p.errorf(p.tok.pos, "undirected_graph", "undirected graphs are not supported: use 'digraph'")
		p.next()
	default:
		p.errorf(p.tok.pos, "syntax", "expected 'digraph', found %s", describe(p.tok))
		panic(bailout{})
	}
	if p.tok.kind == tWord || p.tok.kind == tString {
		p.g.Name = p.tok.text
		if p.tok.kind == tWord && !IsIdentifier(p.tok.text) {
			p.errorf(p.tok.pos, "graph_id", "graph name %q is not an identifier", p.tok.text)
		}
		p.next()
	}
	p.expect(tLBrace, "to open the graph")
	root := &scope{nodeDefaults: Attrs{}, edgeDefaults: Attrs{}}
	p.parseStmts(root, true)
	p.expect(tRBrace, "to close the graph")
	if p.tok.kind == tWord && (p.tok.text == "digraph" || p.tok.text == "graph" || p.tok.text == "strict") {
		p.errorf(p.tok.pos, "multiple_graphs", "only one graph per file is allowed")
		panic(bailout{})
	}
	if p.tok.kind != tEOF {
		p.errorf(p.tok.pos, "syntax", "unexpected %s after the end of the graph", describe(p.tok))
	}
	for _, r := range p.refs {
		if !p.declared[r.id] {
			// Graphviz creates such nodes implicitly; Attractor requires a
			// declaration (edge_target_exists), which catches typos.
			p.g.undeclared = append(p.g.undeclared, r)
			if p.g.undeclaredSet == nil {
				p.g.undeclaredSet = map[string]bool{}
			}
			p.g.undeclaredSet[r.id] = true
		}
	}
	p.g.indexEdges()
	return p.g
}

func (p *parser) parseStmts(sc *scope, top bool) {
	for p.tok.kind != tRBrace && p.tok.kind != tEOF {
		p.parseStmt(sc, top)
		for p.tok.kind == tSemi {
			p.next()
		}
	}
}

func (p *parser) parseStmt(sc *scope, top bool) {
	t := p.tok
	switch {
	case t.kind == tWord && t.text == "graph" && p.peekIs(tLBrack):
		p.next()
		attrs := p.parseAttrLists()
		p.graphAttrs(sc, attrs, top)
	case t.kind == tWord && t.text == "node" && p.peekIs(tLBrack):
		p.next()
		for k, v := range p.parseAttrLists() {
			sc.nodeDefaults[k] = v
		}
	case t.kind == tWord && t.text == "edge" && p.peekIs(tLBrack):
		p.next()
		for k, v := range p.parseAttrLists() {
			sc.edgeDefaults[k] = v
		}
	case t.kind == tWord && t.text == "subgraph" || t.kind == tLBrace:
		p.parseSubgraph(sc)
	case t.kind == tWord && (t.text == "digraph" || t.text == "strict"):
		p.errorf(t.pos, "multiple_graphs", "only one graph per file is allowed: a graph cannot contain another")
		panic(bailout{})
	case t.kind == tWord || t.kind == tString:
		p.next()
		if p.tok.kind == tEq {
			// top-level key=value: a graph attribute
			p.next()
			if !keyRE.MatchString(t.text) || t.kind == tString {
				p.errorf(t.pos, "attribute_key", "invalid attribute key %q", t.text)
			}
			v := p.parseValue(t.text)
			v.KeyPos = t.pos
			p.graphAttrs(sc, Attrs{t.text: v}, top)
			return
		}
		p.nodeOrEdge(sc, t)
	default:
		p.errorf(t.pos, "syntax", "expected a statement, found %s", describe(t))
		panic(bailout{})
	}
}

// peekIs looks at the token after the current one without consuming it.
func (p *parser) peekIs(k tokKind) bool {
	save := *p.lex
	t := p.lex.next()
	*p.lex = save
	return t.kind == k
}

func (p *parser) graphAttrs(sc *scope, attrs Attrs, top bool) {
	if top {
		for k, v := range attrs {
			p.g.Attrs[k] = v
		}
		return
	}
	// Inside a subgraph, graph attributes describe the subgraph: its label
	// becomes a class of the nodes declared in it.
	if n := len(sc.subgraphs); n > 0 {
		for k, v := range attrs {
			sc.subgraphs[n-1].Attrs[k] = v
		}
	}
	if v, ok := attrs["label"]; ok {
		if c := classFromLabel(v.Text); c != "" {
			sc.classes = append(sc.classes, c)
		}
	}
}

// classFromLabel derives a class name: lowercased, spaces to '-', other
// characters that are not letters, digits, '-' or '_' dropped.
func classFromLabel(label string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(label)) {
		switch {
		case r == ' ' || r == '\t':
			b.WriteByte('-')
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_':
			b.WriteRune(r)
		}
	}
	return b.String()
}

func (p *parser) parseSubgraph(sc *scope) {
	child := sc.child()
	sg := &Subgraph{Attrs: Attrs{}, Pos: p.tok.pos}
	if p.tok.kind == tWord && p.tok.text == "subgraph" {
		p.next()
		if p.tok.kind == tWord || p.tok.kind == tString {
			sg.ID = p.tok.text
			p.next()
		}
	}
	if sg.ID == "" {
		sg.ID = "subgraph" + strconv.Itoa(len(p.g.Subgraphs)+1)
	}
	if p.depth++; p.depth > MaxSubgraphDepth {
		p.errorf(sg.Pos, "max_subgraph_depth", "subgraphs nest more than %d deep (MaxSubgraphDepth)", MaxSubgraphDepth)
		panic(bailout{})
	}
	defer func() { p.depth-- }()
	p.g.Subgraphs = append(p.g.Subgraphs, sg)
	child.subgraphs = append(child.subgraphs, sg)
	p.expect(tLBrace, "to open the subgraph")
	p.parseStmts(child, false)
	p.expect(tRBrace, "to close the subgraph")
}

// nodeOrEdge parses a node statement or an edge chain starting at first.
func (p *parser) nodeOrEdge(sc *scope, first token) {
	ids := []token{first}
	if p.tok.kind == tColon {
		p.errorf(p.tok.pos, "syntax", "ports (node:port) are not supported")
		panic(bailout{})
	}
	for p.tok.kind == tArrow || p.tok.kind == tUndirected {
		if p.tok.kind == tUndirected {
			p.errorf(p.tok.pos, "undirected_edge", "undirected edges '--' are not supported: use '->'")
		}
		p.next()
		if p.tok.kind == tLBrace || (p.tok.kind == tWord && p.tok.text == "subgraph") {
			p.errorf(p.tok.pos, "syntax", "edges to subgraphs are not supported: name the target node")
			panic(bailout{})
		}
		if p.tok.kind != tWord && p.tok.kind != tString {
			p.errorf(p.tok.pos, "syntax", "expected a node id after '->', found %s", describe(p.tok))
			panic(bailout{})
		}
		ids = append(ids, p.tok)
		p.next()
	}
	var attrs Attrs
	if p.tok.kind == tLBrack {
		attrs = p.parseAttrLists()
	}
	for _, id := range ids {
		switch {
		case id.kind == tWord && strings.Contains(id.text, ":") && IsIdentifier(id.text[:strings.IndexByte(id.text, ':')]):
			p.errorf(id.pos, "node_id", "%q: ports (node:port) are not supported: name the node only", id.text)
		case id.kind == tString || !IsIdentifier(id.text):
			p.errorf(id.pos, "node_id", "node id %q is not an identifier ([A-Za-z_][A-Za-z0-9_]*): put display names in label", id.text)
		case isKeyword(id.text):
			p.errorf(id.pos, "node_id", "node id %q is a DOT keyword: choose another id", id.text)
		}
	}
	if len(ids) == 1 {
		p.declareNode(sc, first, attrs, true)
		return
	}
	for i := 0; i+1 < len(ids); i++ {
		from, to := ids[i], ids[i+1]
		p.declareNode(sc, from, nil, false)
		p.declareNode(sc, to, nil, false)
		if len(p.g.Edges) >= maxEdges {
			p.errorf(from.pos, "max_edges", "the graph has more than %d edges (MaxEdges)", maxEdges)
			panic(bailout{})
		}
		e := &Edge{From: from.text, To: to.text, Attrs: sc.edgeDefaults.Clone(), Pos: from.pos}
		for k, v := range attrs {
			e.Attrs[k] = v
		}
		p.g.Edges = append(p.g.Edges, e)
		p.refs = append(p.refs, nodeRef{from.text, from.pos}, nodeRef{to.text, to.pos})
	}
}

func (p *parser) declareNode(sc *scope, id token, attrs Attrs, explicit bool) {
	for _, sg := range sc.subgraphs {
		sg.addNode(id.text)
	}
	n := p.g.Node(id.text)
	if n == nil {
		if len(p.g.Nodes) >= maxNodes {
			p.errorf(id.pos, "max_nodes", "the graph has more than %d nodes (MaxNodes)", maxNodes)
			panic(bailout{})
		}
		n = &Node{ID: id.text, Attrs: sc.nodeDefaults.Clone(), Pos: id.pos}
		for _, c := range sc.classes {
			n.addClass(c)
		}
		p.g.Nodes = append(p.g.Nodes, n)
		if p.g.byID != nil {
			p.g.byID[n.ID] = n
		}
	}
	if explicit {
		if !p.declared[id.text] {
			n.Pos = id.pos
			// subgraph classes and defaults apply to the declaring scope
			for k, v := range sc.nodeDefaults {
				if _, set := n.Attrs[k]; !set {
					n.Attrs[k] = v
				}
			}
			for _, c := range sc.classes {
				n.addClass(c)
			}
		}
		p.declared[id.text] = true
	}
	for k, v := range attrs {
		n.Attrs[k] = v
	}
	if v, ok := attrs["class"]; ok {
		for _, c := range strings.Split(v.Text, ",") {
			if c = strings.TrimSpace(c); c != "" {
				n.addClass(c)
			}
		}
	}
	n.syncClassAttr()
}

func (sg *Subgraph) addNode(id string) {
	if sg.has == nil {
		sg.has = make(map[string]bool, len(sg.Nodes)+1)
		for _, have := range sg.Nodes {
			sg.has[have] = true
		}
	}
	if sg.has[id] {
		return
	}
	sg.has[id] = true
	sg.Nodes = append(sg.Nodes, id)
}

func (n *Node) addClass(c string) {
	for _, have := range n.Classes {
		if have == c {
			return
		}
	}
	n.Classes = append(n.Classes, c)
}

// syncClassAttr keeps the class attribute equal to Classes, so that a
// printed graph re-parses to the same model.
func (n *Node) syncClassAttr() {
	if len(n.Classes) == 0 {
		return
	}
	v := n.Attrs["class"]
	v.Text = strings.Join(n.Classes, ",")
	v.Kind = KindString
	v.raw = ""
	n.Attrs["class"] = v
}

// parseAttrLists parses one or more [ ... ] blocks.
func (p *parser) parseAttrLists() Attrs {
	attrs := Attrs{}
	for p.tok.kind == tLBrack {
		p.next()
		first := true
		for p.tok.kind != tRBrack {
			if !first {
				switch p.tok.kind {
				case tComma, tSemi:
					p.next()
					if p.tok.kind == tRBrack {
						continue
					}
				case tWord, tString:
					p.errorf(p.tok.pos, "missing_comma", "expected ',' between attributes before %s", describe(p.tok))
				default:
					p.errorf(p.tok.pos, "syntax", "expected ',' or ']' in the attribute list, found %s", describe(p.tok))
					panic(bailout{})
				}
			}
			first = false
			key := p.tok
			if key.kind != tWord && key.kind != tString {
				p.errorf(key.pos, "syntax", "expected an attribute name, found %s", describe(key))
				panic(bailout{})
			}
			if key.kind == tString || !keyRE.MatchString(key.text) {
				p.errorf(key.pos, "attribute_key", "invalid attribute key %q", key.text)
			}
			p.next()
			if p.tok.kind != tEq {
				p.errorf(p.tok.pos, "syntax", "expected '=' after attribute %q, found %s", key.text, describe(p.tok))
				panic(bailout{})
			}
			p.next()
			v := p.parseValue(key.text)
			v.KeyPos = key.pos
			attrs[key.text] = v
		}
		p.next()
	}
	return attrs
}

// durationKeys are attributes whose value is a duration.
var durationKeys = map[string]bool{"timeout": true, "join_timeout": true, "debounce": true, "budget_time": true,
	"stall_timeout": true, "manager.poll_interval": true, "retry_delay": true, "catchup": true}

// parseValue reads a value token and classifies it.
func (p *parser) parseValue(key string) Value {
	t := p.tok
	switch t.kind {
	case tString:
		p.next()
		v := Value{Text: t.text, Kind: KindString, Pos: t.pos, raw: t.raw}
		if durationKeys[key] && t.text != "" {
			if _, err := ParseDuration(t.text); err != nil {
				p.errorf(t.pos, "bad_duration", "%s: %v", key, err)
			}
		}
		return v
	case tWord:
		p.next()
		v := Value{Text: t.text, Pos: t.pos}
		if durationKeys[key] {
			if _, err := ParseDuration(t.text); err != nil {
				p.errorf(t.pos, "bad_duration", "%s: %v", key, err)
			}
			v.Kind = KindDuration
			if intRE.MatchString(t.text) {
				v.Kind = KindInt
			}
			return v
		}
		switch {
		case t.text == "true" || t.text == "false":
			v.Kind = KindBool
		case intRE.MatchString(t.text):
			v.Kind = KindInt
		case floatRE.MatchString(t.text):
			v.Kind = KindFloat
		case durationRE.MatchString(t.text):
			v.Kind = KindDuration
		case bareRE.MatchString(t.text):
			v.Kind = KindBare
		case durationLikeRE.MatchString(t.text):
			p.errorf(t.pos, "bad_duration", "bad duration %q: an integer followed by ms, s, m, h or d, like 250ms, 15m, 1d", t.text)
		case t.text[0] >= '0' && t.text[0] <= '9' || t.text[0] == '-' || t.text[0] == '+' || t.text[0] == '.':
			p.errorf(t.pos, "bad_value", "bad number %q: an integer like 42 or -1, or a decimal like 0.5", t.text)
		default:
			p.errorf(t.pos, "bad_value", "bad value %q: quote it", t.text)
		}
		return v
	}
	p.errorf(t.pos, "syntax", "expected a value, found %s", describe(t))
	panic(bailout{})
}

// indexEdges numbers edges that join the same pair.
func (g *Graph) indexEdges() {
	seen := map[[2]string]int{}
	for _, e := range g.Edges {
		k := [2]string{e.From, e.To}
		e.Index = seen[k]
		seen[k]++
	}
}
