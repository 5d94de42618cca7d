package graph

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/robfig/cron/v3"
)

// attrHolder is one attribute set with the scope it was written in: the
// graph, subgraph id, node id, or the edge id -> to.
type attrHolder struct {
	attrs Attrs
	scope Scope
	id    string
	to    string
	pos   Pos
}

func nodeHolder(n *Node) attrHolder {
	return attrHolder{attrs: n.Attrs, scope: ScopeNode, id: n.ID, pos: n.Pos}
}

func holders(g *Graph) []attrHolder {
	hs := make([]attrHolder, 0, 1+len(g.Subgraphs)+len(g.Nodes)+len(g.Edges))
	hs = append(hs, attrHolder{attrs: g.Attrs, scope: ScopeGraph, pos: g.Pos})
	for _, sg := range g.Subgraphs {
		hs = append(hs, attrHolder{attrs: sg.Attrs, scope: ScopeSubgraph, id: sg.ID, pos: sg.Pos})
	}
	for _, n := range g.Nodes {
		hs = append(hs, nodeHolder(n))
	}
	for _, e := range g.Edges {
		hs = append(hs, attrHolder{attrs: e.Attrs, scope: ScopeEdge, id: e.From, to: e.To, pos: e.Pos})
	}
	return hs
}

// where names the holder in a message.
func (h attrHolder) where() string {
	switch h.scope {
	case ScopeSubgraph:
		return "subgraph " + h.id
	case ScopeNode:
		return "node " + h.id
	case ScopeEdge:
		return "edge " + h.id + " -> " + h.to
	}
	return "graph"
}

func (h attrHolder) diag(sev Severity, rule, key string, v Value, format string, args ...any) Diagnostic {
	p := v.Pos
	if !p.IsValid() {
		p = h.pos
	}
	d := Diagnostic{Pos: p, Severity: sev, Rule: rule, Message: h.where() + ": " + fmt.Sprintf(format, args...)}
	switch h.scope {
	case ScopeNode:
		d.NodeID = h.id
	case ScopeEdge:
		d.EdgeFrom, d.EdgeTo = h.id, h.to
	}
	return d
}

// ruleAttrTypes checks the value of every attribute of the table (Attributes)
// against its type: integers, booleans, durations, numbers and enumerated
// values. Fidelity values have their own rule (fidelity_valid, a warning).
func ruleAttrTypes(g *Graph) Diagnostics {
	var ds Diagnostics
	for _, h := range holders(g) {
		for _, k := range h.attrs.Keys() {
			spec, ok := LookupAttr(h.scope, k)
			if !ok || k == "fidelity" || k == "default_fidelity" {
				continue
			}
			v := h.attrs[k]
			if err := spec.Check(v.Text); err != nil {
				ds = append(ds, h.diag(SeverityError, "attr_type", k, v, "%s=%q: %v", k, v.Text, err))
			}
		}
	}
	return ds
}

// ruleJoin checks join: on a parallel node it names the fan-in node where
// the branches meet; elsewhere it is all, any or quorum:N (N >= 1).
func ruleJoin(g *Graph) Diagnostics {
	var ds Diagnostics
	for _, n := range g.Nodes {
		v, ok := n.Attrs["join"]
		if !ok || v.Text == "" {
			continue
		}
		h := nodeHolder(n)
		if g.HandlerType(n) == TypeParallel {
			if g.Node(v.Text) == nil {
				ds = append(ds, h.diag(SeverityError, "join_valid", "join", v, "join=%q: a parallel node's join names its fan-in node, and there is no node %q", v.Text, v.Text))
			}
			continue
		}
		switch {
		case v.Text == "all" || v.Text == "any":
		case strings.HasPrefix(v.Text, "quorum:"):
			q, err := strconv.Atoi(strings.TrimPrefix(v.Text, "quorum:"))
			if err != nil || q < 1 {
				ds = append(ds, h.diag(SeverityError, "join_valid", "join", v, "join=%q: quorum:N wants a count N >= 1", v.Text))
			} else if in := len(g.Incoming(n.ID)); in > 0 && q > in && g.Kind() != "session" {
				ds = append(ds, h.diag(SeverityWarning, "join_valid", "join", v, "join=%q: the node has only %d incoming edges", v.Text, in))
			}
		default:
			ds = append(ds, h.diag(SeverityError, "join_valid", "join", v, "join=%q: want all, any or quorum:N", v.Text))
		}
	}
	return ds
}

// cronSpec is the cron dialect of the scheduler: five fields, or six with
// seconds first, or a descriptor such as @every 1m or @hourly.
var cronSpec = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseSchedule checks a cron spec as the scheduler reads it.
func ParseSchedule(spec string) error {
	_, err := cronSpec.Parse(spec)
	return err
}

// ruleSchedule checks trigger=schedule nodes: they need a schedule, and a
// schedule must be a cron spec.
func ruleSchedule(g *Graph) Diagnostics {
	var ds Diagnostics
	for _, n := range g.Nodes {
		h := nodeHolder(n)
		v, has := n.Attrs["schedule"]
		if t, ok := n.Attrs["trigger"]; ok && t.Text == "schedule" && (!has || strings.TrimSpace(v.Text) == "") {
			d := h.diag(SeverityError, "schedule_valid", "trigger", t, "trigger=schedule needs a schedule (a cron spec)")
			d.Fix = `schedule="*/5 * * * *"`
			ds = append(ds, d)
			continue
		}
		if has && strings.TrimSpace(v.Text) != "" {
			if err := ParseSchedule(v.Text); err != nil {
				ds = append(ds, h.diag(SeverityError, "schedule_valid", "schedule", v, "schedule=%q: %v", v.Text, err))
			}
		}
	}
	return ds
}

// graphvizAttrs are Graphviz's own attributes, which are kept without a
// word; attr_unknown never suggests a Switchyard attribute for them.
var graphvizAttrs = map[string]bool{}

func init() {
	for _, k := range strings.Fields(`_background area arrowhead arrowsize arrowtail bb beautify bgcolor center
		charset class cluster clusterrank color colorscheme comment compound concentrate constraint Damping
		decorate defaultdist dim dimen dir diredgeconstraints distortion dpi edgehref edgetarget edgetooltip
		edgeURL epsilon esep fillcolor fixedsize fontcolor fontname fontnames fontpath fontsize forcelabels
		gradientangle group head_lp headclip headhref headlabel headport headtarget headtooltip headURL height
		href id image imagepath imagepos imagescale inputscale K label label_scheme labelangle labeldistance
		labelfloat labelfontcolor labelfontname labelfontsize labelhref labeljust labelloc labeltarget
		labeltooltip labelURL landscape layer layerlistsep layers layerselect layersep layout len levels
		levelsgap lhead lheight linelength lp ltail lwidth margin maxiter mclimit mindist minlen mode model
		newrank nodesep nojustify normalize notranslate nslimit nslimit1 oneblock ordering orientation
		outputorder overlap overlap_scaling overlap_shrink pack packmode pad page pagedir pencolor penwidth
		peripheries pin pos quadtree quantum radius rank rankdir ranksep ratio rects regular remincross
		repulsiveforce resolution root rotate rotation samehead sametail samplepoints scale searchsize sep
		shape shapefile showboxes sides size skew smoothing sortv splines start style stylesheet tail_lp
		tailclip tailhref taillabel tailport tailtarget tailtooltip tailURL target TBbalance tooltip
		truecolor URL vertices viewport voro_margin weight width xdotversion xlabel xlp z`) {
		graphvizAttrs[k] = true
	}
}

// foreignAttrs are attributes other Attractor implementations read that
// Switchyard does not, with the Switchyard attribute that does the job: a
// graph written for them would otherwise lose them without a word.
var foreignAttrs = map[string]string{
	"llm_prompt": "prompt", // kilroy
}

// ruleAttrUnknown warns about an attribute that is neither Switchyard's nor
// Graphviz's but is one typo away from one of Switchyard's ("promt"), or
// is another implementation's (foreignAttrs). Other unknown attributes are
// kept silently: custom handlers read them.
func ruleAttrUnknown(g *Graph) Diagnostics {
	var ds Diagnostics
	for _, h := range holders(g) {
		for _, k := range h.attrs.Keys() {
			if use, ok := foreignAttrs[k]; ok && len(attrIndex[k]) == 0 {
				d := h.diag(SeverityWarning, "attr_unknown", k, h.attrs[k],
					"unknown attribute %q (another Attractor implementation's): it is ignored; use %q", k, use)
				if kp := h.attrs[k].KeyPos; kp.IsValid() {
					d.Pos = kp
				}
				ds = append(ds, d)
				continue
			}
			if len(attrIndex[k]) > 0 || graphvizAttrs[k] || len(k) < 4 {
				continue
			}
			if near := nearestAttr(k, h.scope); near != "" {
				d := h.diag(SeverityWarning, "attr_unknown", k, h.attrs[k], "unknown attribute %q: did you mean %q?", k, near)
				if kp := h.attrs[k].KeyPos; kp.IsValid() {
					d.Pos = kp
				}
				ds = append(ds, d)
			}
		}
	}
	return ds
}

// nearestAttr returns the attribute of scope within edit distance 1 of key
// (2 for keys of 8 or more characters), or "".
func nearestAttr(key string, scope Scope) string {
	limit := 1
	if len(key) >= 8 {
		limit = 2
	}
	best, bestD := "", limit+1
	for _, a := range attrTable {
		if a.Scopes&scope == 0 {
			continue
		}
		if d := editDistance(key, a.Key, limit); d < bestD {
			best, bestD = a.Key, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, or limit+1 when it
// is larger than limit.
func editDistance(a, b string, limit int) int {
	if d := len(a) - len(b); d > limit || -d > limit {
		return limit + 1
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin > limit {
			return limit + 1
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
