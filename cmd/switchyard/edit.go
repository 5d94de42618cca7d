package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/session"
)

func init() { subcommands = append(subcommands, newEditCmd) }

// editRequest is what `switchyard edit` sends on sy.<session>.ctl.edit.
type editRequest struct {
	File   string `json:"file"`
	Source string `json:"source"`
}

// editReply is the serving process's answer.
type editReply struct {
	Version     uint64   `json:"version,omitempty"`
	File        string   `json:"file,omitempty"`
	Added       []string `json:"added,omitempty"`
	Removed     []string `json:"removed,omitempty"`
	Changed     []string `json:"changed,omitempty"`
	Error       string   `json:"error,omitempty"`
	Invalid     bool     `json:"invalid,omitempty"`
	Diagnostics []string `json:"diagnostics,omitempty"`
}

func newEditCmd() *cobra.Command {
	c := &connFlags{}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "edit SESSION NEW.dot",
		Short: "Apply a new version of a served session's graph while it runs",
		Long: `Edit sends NEW.dot to the process serving SESSION, which validates it and applies
the difference to the running graph: added nodes start, removed nodes finish their
current work and stop, changed attributes apply from each node's next firing, and
edges that still exist keep what is buffered on them. An invalid file changes nothing:
its diagnostics are printed and the exit status is 2. The edit needs the admin credential.`,
		Args: sessionArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := os.ReadFile(args[1])
			if err != nil {
				return usageErr(err)
			}
			data, err := request(c, broker.Control(args[0], "edit"), editRequest{File: args[1], Source: string(src)})
			if err != nil {
				return err
			}
			var rep editReply
			if err := json.Unmarshal(data, &rep); err != nil {
				return &exitError{code: 1, err: fmt.Errorf("edit: bad answer: %w", err)}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				fmt.Fprintln(out, string(data))
			}
			switch {
			case rep.Invalid:
				for _, d := range rep.Diagnostics {
					fmt.Fprintln(cmd.ErrOrStderr(), d)
				}
				return &exitError{code: 2, err: errors.New("the edit is invalid; the session is unchanged")}
			case rep.Error != "":
				return &exitError{code: 1, err: errors.New("edit refused: " + rep.Error)}
			}
			if !asJSON {
				fmt.Fprintf(out, "session %s is at version %d: added [%s], removed [%s], changed [%s]\n", args[0], rep.Version,
					strings.Join(rep.Added, " "), strings.Join(rep.Removed, " "), strings.Join(rep.Changed, " "))
			}
			return nil
		},
	}
	c.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the answer as JSON")
	return cmd
}

// serveEdit answers an edit request for a served session.
func serveEdit(s *session.Session, m *nats.Msg) editReply {
	var req editRequest
	if err := json.Unmarshal(m.Data, &req); err != nil || req.Source == "" {
		return editReply{Error: "want {\"file\": NAME, \"source\": DOT}"}
	}
	if req.File == "" {
		req.File = "edit.dot"
	}
	ed, diags, err := s.Edit(req.File, []byte(req.Source))
	if errors.Is(err, session.ErrInvalidEdit) {
		rep := editReply{Invalid: true, Error: "invalid graph"}
		for _, d := range diags {
			rep.Diagnostics = append(rep.Diagnostics, d.String())
		}
		return rep
	}
	if err != nil {
		return editReply{Error: err.Error()}
	}
	return editReply{Version: ed.Version, File: req.File, Added: ed.Added, Removed: ed.Removed, Changed: ed.Changed}
}
