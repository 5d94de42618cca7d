package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/graph"
)

func init() { subcommands = append(subcommands, newValidateCmd) }

func newValidateCmd() *cobra.Command {
	var asJSON, asSession bool
	var pc providerCheck
	cmd := &cobra.Command{
		Use:   "validate FILE.dot...",
		Short: "Check DOT files and print their diagnostics",
		Long: `Validate parses each file, applies its transforms and runs every lint rule.
Diagnostics print as FILE:LINE:COL: error|warning: RULE: message. Exit status: 0 when
no file has an error (warnings are allowed), 1 when any file has an error, 2 for usage
errors.

With --providers, it also checks that every agent the graph runs can run, as run does
before it starts: the provider exists, its CLI executable is found (SWITCHYARD_<NAME>_BIN
or PATH), a command node's agent_command is found, the node's role is known. A problem
is an error diagnostic (rule provider_ready) at the node.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErr(fmt.Errorf("validate needs at least one DOT file"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var check func(*graph.Graph) []graph.Diagnostic
			if pc.enabled {
				providers, err := newProviders(providerFiles{roles: pc.roles, override: pc.override})
				if err != nil {
					return usageErr(err)
				}
				ctx := cmd.Context()
				if ctx == nil {
					ctx = context.Background()
				}
				check = func(g *graph.Graph) []graph.Diagnostic { return providers.problems(ctx, g, pc.provider) }
			}
			return validateFiles(args, asJSON, asSession, check, cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the diagnostics as JSON")
	cmd.Flags().BoolVar(&asSession, "session", false, "validate as a reactive session (no start or exit node needed)")
	cmd.Flags().BoolVar(&pc.enabled, "providers", false, "also check that the agent providers the graph uses can run")
	cmd.Flags().StringVar(&pc.provider, "provider", "mock", "with --providers: the default agent provider, as for run")
	cmd.Flags().BoolVar(&pc.override, "override-providers", false, "with --providers: every agent node runs on --provider, as for run")
	cmd.Flags().StringVar(&pc.roles, "roles", "", "with --providers: directory of agent roles, as for run")
	return cmd
}

// providerCheck is what validate --providers checks with.
type providerCheck struct {
	enabled, override bool
	provider, roles   string
}

// jsonDiagnostic is a diagnostic as `validate --json` prints it.
type jsonDiagnostic struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Col  int    `json:"col"`
	graph.Diagnostic
}

// validateFiles prints the diagnostics of each file; check (nil = none)
// adds more for a graph that loaded without errors.
func validateFiles(files []string, asJSON, asSession bool, check func(*graph.Graph) []graph.Diagnostic, out io.Writer) error {
	failed := false
	all := []jsonDiagnostic{}
	opts := []graph.LoadOption{graph.WithKnownTypes(builtinTypes()...)}
	if asSession {
		opts = append(opts, graph.AsSession())
	}
	for _, f := range files {
		g, diags := graph.LoadFile(f, opts...)
		if g != nil && !diags.HasErrors() && check != nil {
			diags = append(diags, check(g)...)
		}
		if diags.HasErrors() {
			failed = true
		}
		for _, d := range diags {
			if asJSON {
				file := d.Pos.File
				if file == "" {
					file = f
				}
				all = append(all, jsonDiagnostic{File: file, Line: d.Pos.Line, Col: d.Pos.Col, Diagnostic: d})
			} else {
				fmt.Fprintln(out, d.String())
			}
		}
	}
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(all); err != nil {
			return err
		}
	}
	if failed {
		return &exitError{code: 1}
	}
	return nil
}
