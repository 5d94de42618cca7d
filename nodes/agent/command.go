package agent

import (
	"context"
	"fmt"
	"os/exec"
	"strings"

	"github.com/switchyard/switchyard/nodes/agent/internal/proc"
)

// Command runs any other CLI agent: the node's agent_command attribute
// (else CLIOptions.Bin, the provider's default command line) is run by
// /bin/sh -c in the working directory, with the prompt (system
// instructions first) on stdin; its stdout is the response and its exit
// status the success. Model, reasoning effort, the session to resume and
// the granted capabilities are passed in the environment (SWITCHYARD_MODEL,
// SWITCHYARD_REASONING_EFFORT, SWITCHYARD_RESUME_SESSION,
// SWITCHYARD_PERMISSIONS). A line "SWITCHYARD_SESSION_ID=ID" on stdout
// reports the agent's session id and is not part of the response.
type Command struct {
	cli
	defaultCmd string
}

var (
	_ Provider    = (*Command)(nil)
	_ Checker     = (*Command)(nil)
	_ NodeChecker = (*Command)(nil)
)

// NodeChecker is implemented by providers whose readiness depends on the
// node's attributes (the command provider's agent_command): the session
// calls it for each node that will use the provider, before anything runs.
type NodeChecker interface {
	CheckNode(ctx context.Context, attrs map[string]string) error
}

// AttrAgentCommand is the node attribute naming the command of the
// command provider.
const AttrAgentCommand = "agent_command"

// NewCommand returns the command provider. opts.Bin, when set, is the
// command line used for nodes without agent_command.
func NewCommand(opts CLIOptions) *Command {
	def := opts.Bin
	opts.Bin = "/bin/sh"
	return &Command{cli: newCLI("command", "/bin/sh", "the shell that runs agent_command", opts), defaultCmd: def}
}

// Name is "command".
func (c *Command) Name() string { return "command" }

// Check verifies the shell and, when one is set, the default command.
func (c *Command) Check(ctx context.Context) error {
	if err := c.cli.Check(ctx); err != nil {
		return err
	}
	if c.defaultCmd != "" {
		return c.checkLine(c.defaultCmd)
	}
	return nil
}

// CheckNode verifies that the node's command (agent_command, else the
// default) is set and that its executable exists.
func (c *Command) CheckNode(ctx context.Context, attrs map[string]string) error {
	line := c.commandFor(attrs)
	if line == "" {
		return &Error{Provider: c.name, Class: ClassBadRequest, Msg: "no agent_command attribute on the node (and no default command)"}
	}
	return c.checkLine(line)
}

// checkLine looks up the first word of a command line when it is a plain
// word (a line that starts with shell syntax is left to the shell).
func (c *Command) checkLine(line string) error {
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return nil
	}
	word := fields[0]
	if strings.ContainsAny(word, "=$`'\"(){};|&<>") {
		return nil
	}
	if _, err := exec.LookPath(word); err != nil {
		return &Error{Provider: c.name, Err: fmt.Errorf("%w: %v", ErrNotInstalled, err),
			Msg: fmt.Sprintf("agent_command: executable %q not found", word)}
	}
	return nil
}

func (c *Command) commandFor(attrs map[string]string) string {
	if s := strings.TrimSpace(attrs[AttrAgentCommand]); s != "" {
		return s
	}
	return strings.TrimSpace(c.defaultCmd)
}

// Run runs the node's command.
func (c *Command) Run(ctx context.Context, req *Request, onEvent func(Event)) (*Result, error) {
	line := c.commandFor(req.Attrs)
	if line == "" {
		return nil, &Error{Provider: c.name, Class: ClassBadRequest, Msg: "bad_request: no agent_command attribute on the node"}
	}
	pl, err := c.plan(req)
	if err != nil {
		return nil, err
	}
	cc := *c
	cc.opts.Env = append(append([]string{}, c.opts.Env...),
		"SWITCHYARD_MODEL="+pl.model,
		"SWITCHYARD_REASONING_EFFORT="+req.ReasoningEffort,
		"SWITCHYARD_RESUME_SESSION="+req.ResumeSession,
		"SWITCHYARD_PERMISSIONS="+strings.Join(pl.caps, ","),
	)
	stdin := withSystem(pl.system, req.Prompt)
	if stdin == "" {
		stdin = "\n"
	}
	return cc.execute(ctx, req, []string{"-c", line}, stdin, &commandParser{c: &cc}, onEvent)
}

type commandParser struct {
	c         *Command
	out       strings.Builder
	sessionID string
}

func (p *commandParser) raw() {}

func (p *commandParser) line(b []byte, emit func(Event)) bool {
	s := string(b)
	if id, ok := strings.CutPrefix(s, "SWITCHYARD_SESSION_ID="); ok {
		p.sessionID = strings.TrimSpace(id)
		return true
	}
	p.out.WriteString(s)
	p.out.WriteByte('\n')
	emit(Event{Kind: "text", Text: s + "\n"})
	return true
}

func (p *commandParser) finish(ex *proc.Exit, emit func(Event)) (*Result, error) {
	res := &Result{Text: strings.TrimRight(p.out.String(), "\n"), SessionID: p.sessionID}
	if ex.Canceled {
		return res, nil
	}
	if ex.Code == 0 {
		res.Success = true
		return res, nil
	}
	// A failing command is the agent's answer "fail", unless what it said
	// names an error class (then the retry policy decides).
	e := p.c.failure(ex)
	if e.Class != ClassUnknown {
		return res, e
	}
	res.Notes = strings.TrimPrefix(e.Msg, string(ClassUnknown)+": ")
	return res, nil
}
