package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/graph"
)

func init() { subcommands = append(subcommands, newValidateCmd) }

func newValidateCmd() *cobra.Command {
	var asJSON, asSession bool
	cmd := &cobra.Command{
		Use:   "validate FILE.dot...",
		Short: "Check DOT files and print their diagnostics",
		Long: `Validate parses each file, applies its transforms and runs every lint rule.
Diagnostics print as FILE:LINE:COL: error|warning: RULE: message. Exit status: 0 when
no file has an error (warnings are allowed), 1 when any file has an error, 2 for usage
errors.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErr(fmt.Errorf("validate needs at least one DOT file"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return validateFiles(args, asJSON, asSession, cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the diagnostics as JSON")
	cmd.Flags().BoolVar(&asSession, "session", false, "validate as a reactive session (no start or exit node needed)")
	return cmd
}

// jsonDiagnostic is a diagnostic as `validate --json` prints it.
type jsonDiagnostic struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Col  int    `json:"col"`
	graph.Diagnostic
}

func validateFiles(files []string, asJSON, asSession bool, out io.Writer) error {
	failed := false
	all := []jsonDiagnostic{}
	opts := []graph.LoadOption{graph.WithKnownTypes(builtinTypes()...)}
	if asSession {
		opts = append(opts, graph.AsSession())
	}
	for _, f := range files {
		_, diags := graph.LoadFile(f, opts...)
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
