package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/nodes"
)

func init() { subcommands = append(subcommands, newInspectCmd, newHandlersCmd) }

// InspectSchema names the form of `inspect --json`; it changes only when a
// field changes meaning or goes away (new fields may be added).
const InspectSchema = "switchyard.inspect/v1"

// inspectGraph is what `switchyard inspect --json` prints (docs/cli.md).
type inspectGraph struct {
	Schema      string            `json:"schema"`
	File        string            `json:"file"`
	Name        string            `json:"name"`
	Kind        string            `json:"kind"`
	Attrs       map[string]string `json:"attrs"`
	Nodes       []inspectNode     `json:"nodes"`
	Edges       []inspectEdge     `json:"edges"`
	Subgraphs   []inspectSubgraph `json:"subgraphs"`
	Diagnostics []jsonDiagnostic  `json:"diagnostics"`
}

type inspectNode struct {
	ID      string            `json:"id"`
	Shape   string            `json:"shape"`
	Label   string            `json:"label"`
	Type    string            `json:"type"`
	Classes []string          `json:"classes"`
	Line    int               `json:"line"`
	Col     int               `json:"col"`
	Attrs   map[string]string `json:"attrs"`
}

type inspectEdge struct {
	From      string            `json:"from"`
	To        string            `json:"to"`
	Index     int               `json:"index"`
	Label     string            `json:"label"`
	Condition string            `json:"condition"`
	Weight    int               `json:"weight"`
	Line      int               `json:"line"`
	Col       int               `json:"col"`
	Attrs     map[string]string `json:"attrs"`
}

type inspectSubgraph struct {
	ID    string            `json:"id"`
	Attrs map[string]string `json:"attrs"`
	Nodes []string          `json:"nodes"`
}

func attrMap(a graph.Attrs) map[string]string {
	m := make(map[string]string, len(a))
	for k, v := range a {
		m[k] = v.Text
	}
	return m
}

func newInspectCmd() *cobra.Command {
	var asJSON, asSession bool
	cmd := &cobra.Command{
		Use:   "inspect FILE.dot",
		Short: "Print the parsed, transformed graph (--json: as data)",
		Long: `Inspect loads a DOT file as run does — defaults, subgraphs, classes, the model
stylesheet and the transforms applied — and prints the graph it would run: its attributes,
every node with its resolved handler type and attributes, every edge. With --json the
graph is one JSON object of the schema switchyard.inspect/v1 (docs/cli.md). Exit status:
0, 1 when the file has errors (the graph is still printed when it could be read), 2 for
usage errors.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErr(fmt.Errorf("inspect takes one DOT file, got %d arguments", len(args)))
			}
			return nil
		},
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return []cobra.Completion{"dot", "gv"}, cobra.ShellCompDirectiveFilterFileExt
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return inspectFile(args[0], asJSON, asSession, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the graph as JSON")
	cmd.Flags().BoolVar(&asSession, "session", false, "load it as a reactive session (no start or exit node needed)")
	return cmd
}

// inspectFile loads file and prints its graph.
func inspectFile(file string, asJSON, asSession bool, out, errOut io.Writer) error {
	opts := []graph.LoadOption{graph.WithKnownTypes(builtinTypes()...)}
	if asSession {
		opts = append(opts, graph.AsSession())
	}
	g, diags := graph.LoadFile(file, opts...)
	if g == nil {
		for _, d := range diags {
			fmt.Fprintln(errOut, d.String())
		}
		return &exitError{code: 1}
	}
	ig := inspectGraph{Schema: InspectSchema, File: file, Name: g.Name, Kind: g.Kind(), Attrs: attrMap(g.Attrs),
		Nodes: []inspectNode{}, Edges: []inspectEdge{}, Subgraphs: []inspectSubgraph{}, Diagnostics: []jsonDiagnostic{}}
	for _, n := range g.Nodes {
		classes := n.Classes
		if classes == nil {
			classes = []string{}
		}
		ig.Nodes = append(ig.Nodes, inspectNode{ID: n.ID, Shape: n.Shape(), Label: n.Label(), Type: g.HandlerType(n),
			Classes: classes, Line: n.Pos.Line, Col: n.Pos.Col, Attrs: attrMap(n.Attrs)})
	}
	for _, e := range g.Edges {
		ig.Edges = append(ig.Edges, inspectEdge{From: e.From, To: e.To, Index: e.Index, Label: e.Label(),
			Condition: e.Condition(), Weight: e.Weight(), Line: e.Pos.Line, Col: e.Pos.Col, Attrs: attrMap(e.Attrs)})
	}
	for _, s := range g.Subgraphs {
		members := s.Nodes
		if members == nil {
			members = []string{}
		}
		ig.Subgraphs = append(ig.Subgraphs, inspectSubgraph{ID: s.ID, Attrs: attrMap(s.Attrs), Nodes: members})
	}
	for _, d := range diags {
		f := d.Pos.File
		if f == "" {
			f = file
		}
		ig.Diagnostics = append(ig.Diagnostics, jsonDiagnostic{File: f, Line: d.Pos.Line, Col: d.Pos.Col, Diagnostic: d})
	}
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(ig); err != nil {
			return err
		}
	} else {
		printInspect(out, &ig)
		for _, d := range diags {
			fmt.Fprintln(errOut, d.String())
		}
	}
	if diags.HasErrors() {
		return &exitError{code: 1}
	}
	return nil
}

// printInspect is the human form: the graph's attributes, a table of
// nodes, a list of edges.
func printInspect(w io.Writer, ig *inspectGraph) {
	fmt.Fprintf(w, "graph %s (%s)\n", ig.Name, ig.Kind)
	for _, k := range sortedKeys(ig.Attrs) {
		fmt.Fprintf(w, "  %s = %q\n", k, ig.Attrs[k])
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nNODE\tTYPE\tSHAPE\tLABEL\tATTRIBUTES")
	for _, n := range ig.Nodes {
		var attrs []string
		for _, k := range sortedKeys(n.Attrs) {
			if k != "shape" && k != "label" {
				attrs = append(attrs, fmt.Sprintf("%s=%q", k, n.Attrs[k]))
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", n.ID, n.Type, n.Shape, n.Label, strings.Join(attrs, " "))
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "\nEDGES")
	for _, e := range ig.Edges {
		var extra []string
		for _, k := range sortedKeys(e.Attrs) {
			extra = append(extra, fmt.Sprintf("%s=%q", k, e.Attrs[k]))
		}
		fmt.Fprintf(w, "  %s -> %s  %s\n", e.From, e.To, strings.Join(extra, " "))
	}
}

// handlerInfo is one handler type as `handlers --json` prints it.
type handlerInfo struct {
	Type   string   `json:"type"`
	Doc    string   `json:"doc"`
	Shapes []string `json:"shapes"`
}

func newHandlersCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "handlers",
		Short: "List the registered handler types",
		Long: `Handlers lists the handler types a node can name with type=, with the shapes that
select each (the shape table) and what it does.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			list := registeredHandlers()
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(list)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TYPE\tSHAPES\tDESCRIPTION")
			for _, h := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", h.Type, strings.Join(h.Shapes, ", "), h.Doc)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the list as JSON")
	return cmd
}

// registeredHandlers lists the handler types the CLI registers, by type.
func registeredHandlers() []handlerInfo {
	r := nodes.NewRegistry()
	_ = nodes.RegisterBuiltins(r, nodes.Deps{})
	list := []handlerInfo{}
	for _, t := range r.Types() {
		info, _ := r.Info(t)
		list = append(list, handlerInfo{Type: t, Doc: info.Doc, Shapes: graph.ShapesOf(t)})
	}
	return list
}
