package graph

import (
	"fmt"
	"strings"
)

// StyleRule is one rule of a model stylesheet (spec section 8):
// `selector { property: value; ... }`.
type StyleRule struct {
	Selector    string // "*", a shape name, ".class" or "#id"
	Specificity int    // * 0 < shape 1 < .class 2 < #id 3
	Props       []StyleProp
	Order       int
}

// StyleProp is one property of a rule.
type StyleProp struct {
	Key, Value string
}

// StyleError is a malformed stylesheet; Offset is a byte offset into it.
type StyleError struct {
	Offset int
	Msg    string
}

func (e *StyleError) Error() string { return e.Msg }

// ParseStylesheet reads a model stylesheet. Selectors may be grouped with
// commas; property values may be quoted.
func ParseStylesheet(src string) ([]StyleRule, error) {
	var rules []StyleRule
	i := 0
	skip := func() {
		for i < len(src) {
			if strings.HasPrefix(src[i:], "/*") {
				end := strings.Index(src[i+2:], "*/")
				if end < 0 {
					i = len(src)
					return
				}
				i += end + 4
				continue
			}
			if c := src[i]; c == ' ' || c == '\t' || c == '\n' || c == '\r' {
				i++
				continue
			}
			return
		}
	}
	for {
		skip()
		if i >= len(src) {
			return rules, nil
		}
		open := strings.IndexByte(src[i:], '{')
		if open < 0 {
			return nil, &StyleError{Offset: i, Msg: "expected '{' after the selector"}
		}
		selText := src[i : i+open]
		selStart := i
		i += open + 1
		closeAt := strings.IndexByte(src[i:], '}')
		if closeAt < 0 {
			return nil, &StyleError{Offset: i - 1, Msg: "rule opened here is never closed with '}'"}
		}
		body := src[i : i+closeAt]
		bodyStart := i
		i += closeAt + 1
		props, err := parseProps(body, bodyStart)
		if err != nil {
			return nil, err
		}
		off := selStart
		for _, sel := range strings.Split(selText, ",") {
			lead := len(sel) - len(strings.TrimLeft(sel, " \t\r\n"))
			s := strings.TrimSpace(sel)
			spec, err := selectorSpecificity(s)
			if err != nil {
				return nil, &StyleError{Offset: off + lead, Msg: err.Error()}
			}
			rules = append(rules, StyleRule{Selector: s, Specificity: spec, Props: props, Order: len(rules)})
			off += len(sel) + 1
		}
	}
}

func selectorSpecificity(s string) (int, error) {
	switch {
	case s == "":
		return 0, fmt.Errorf("empty selector")
	case s == "*":
		return 0, nil
	case strings.HasPrefix(s, "#"):
		if !IsIdentifier(s[1:]) {
			return 0, fmt.Errorf("bad id selector %q", s)
		}
		return 3, nil
	case strings.HasPrefix(s, "."):
		name := s[1:]
		if name == "" || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
			return 0, fmt.Errorf("bad class selector %q: class names are [a-z0-9-]", s)
		}
		return 2, nil
	case IsIdentifier(s):
		return 1, nil
	}
	return 0, fmt.Errorf("bad selector %q: use *, a shape name, .class or #id", s)
}

func parseProps(body string, base int) ([]StyleProp, error) {
	var props []StyleProp
	off := 0
	for _, decl := range strings.Split(body, ";") {
		start := base + off
		off += len(decl) + 1
		if strings.TrimSpace(decl) == "" {
			continue
		}
		k, v, ok := strings.Cut(decl, ":")
		lead := len(decl) - len(strings.TrimLeft(decl, " \t\r\n"))
		if !ok {
			return nil, &StyleError{Offset: start + lead, Msg: fmt.Sprintf("expected property: value, found %q", strings.TrimSpace(decl))}
		}
		k = strings.TrimSpace(k)
		v = strings.TrimSpace(v)
		if !keyRE.MatchString(k) {
			return nil, &StyleError{Offset: start + lead, Msg: fmt.Sprintf("bad property name %q", k)}
		}
		if len(v) >= 2 && (v[0] == '"' && v[len(v)-1] == '"' || v[0] == '\'' && v[len(v)-1] == '\'') {
			v = v[1 : len(v)-1]
		}
		if v == "" {
			return nil, &StyleError{Offset: start + lead, Msg: fmt.Sprintf("property %q has no value", k)}
		}
		props = append(props, StyleProp{Key: k, Value: v})
	}
	return props, nil
}

// matches reports whether the rule selects node n.
func (r StyleRule) matches(n *Node) bool {
	switch r.Specificity {
	case 0:
		return true
	case 1:
		return n.Shape() == r.Selector
	case 2:
		for _, c := range n.Classes {
			if c == r.Selector[1:] {
				return true
			}
		}
		return false
	case 3:
		return n.ID == r.Selector[1:]
	}
	return false
}

// ApplyStylesheet sets, on every node, each property of the most specific
// matching rule (later rules win among equals), unless the node sets that
// attribute itself.
func ApplyStylesheet(g *Graph, rules []StyleRule) {
	for _, n := range g.Nodes {
		type pick struct {
			spec, order int
			value       string
		}
		best := map[string]pick{}
		for _, r := range rules {
			if !r.matches(n) {
				continue
			}
			for _, p := range r.Props {
				cur, ok := best[p.Key]
				if !ok || r.Specificity > cur.spec || r.Specificity == cur.spec && r.Order >= cur.order {
					best[p.Key] = pick{r.Specificity, r.Order, p.Value}
				}
			}
		}
		for k, p := range best {
			if !n.Attrs.Has(k) {
				n.Attrs[k] = Value{Text: p.value, Kind: KindString}
			}
		}
	}
}
