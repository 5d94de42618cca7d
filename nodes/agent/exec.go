package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/switchyard/switchyard/nodes/agent/internal/proc"
)

// ErrNotInstalled is wrapped by the error of a provider whose executable
// cannot be found.
var ErrNotInstalled = errors.New("agent: executable not found")

// maxArgPrompt is the longest prompt passed as an argument; longer ones go
// on stdin (Linux limits one argument to 128 KiB).
const maxArgPrompt = 64 << 10

// CLIOptions configures a CLI provider. The zero value is usable.
type CLIOptions struct {
	// Bin is the executable, a name looked up in PATH or a path. "" means
	// the environment variable SWITCHYARD_<NAME>_BIN, else the CLI's usual
	// name (claude, codex, gemini).
	Bin string
	// Args are extra arguments, added after the provider's own flags and
	// before the prompt.
	Args []string
	// Env is extra environment for the agent ("KEY=value").
	Env []string
	// Model is the model used when a request names none ("" = the CLI's
	// default). It also prices runs whose CLI does not report a cost.
	Model string
	// Prices prices runs whose CLI does not report a cost
	// (nil = DefaultPrices()).
	Prices Prices
	// Roles resolves Request.Role (nil = BuiltinRoles()).
	Roles map[string]Role
	// Grace is the time between SIGTERM and SIGKILL when a run is
	// cancelled (0 = 2s).
	Grace time.Duration
	// Logger receives faults worth a look (malformed output lines); nil
	// discards them.
	Logger *slog.Logger
}

// cli is what the CLI providers share: finding the executable, resolving
// the role and permissions of a request, the child's environment, and
// running the child while a parser reads its output.
type cli struct {
	name   string // provider name
	bin    string // executable name before lookup
	envVar string // SWITCHYARD_<NAME>_BIN
	hint   string // how to install it
	opts   CLIOptions
	log    *slog.Logger
}

func newCLI(name, defaultBin, hint string, opts CLIOptions) cli {
	envName := strings.ToUpper(strings.TrimSuffix(name, "-cli")) // gemini-cli: SWITCHYARD_GEMINI_BIN
	c := cli{name: name, bin: opts.Bin, envVar: "SWITCHYARD_" + envName + "_BIN", hint: hint, opts: opts}
	if c.bin == "" {
		c.bin = os.Getenv(c.envVar)
	}
	if c.bin == "" {
		c.bin = defaultBin
	}
	if c.opts.Prices == nil {
		c.opts.Prices = DefaultPrices()
	}
	if c.opts.Roles == nil {
		c.opts.Roles = BuiltinRoles()
	}
	c.log = opts.Logger
	if c.log == nil {
		c.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c
}

// Bin returns the executable the provider runs, before PATH lookup.
func (c *cli) Bin() string { return c.bin }

// lookPath resolves the executable or says clearly why it cannot.
func (c *cli) lookPath() (string, error) {
	path, err := exec.LookPath(c.bin)
	if err != nil {
		return "", &Error{Provider: c.name, Err: fmt.Errorf("%w: %v", ErrNotInstalled, err),
			Msg: fmt.Sprintf("executable %q not found (%s, or set %s to its path)", c.bin, c.hint, c.envVar)}
	}
	return path, nil
}

// Check reports a missing executable (agent.Checker).
func (c *cli) Check(ctx context.Context) error {
	_, err := c.lookPath()
	return err
}

// plan is what a request resolves to once its role and workflow mode are
// applied.
type plan struct {
	system   string
	caps     []string
	maxTurns int
	model    string
	planning bool
}

// plan applies the request's role (system instructions, capabilities,
// turns) and workflow_mode="planning" (edits only under docs/).
func (c *cli) plan(req *Request) (*plan, error) {
	p := &plan{model: req.Model}
	if p.model == "" {
		p.model = c.opts.Model
	}
	var systems []string
	var roleCaps []string
	if req.Role != "" {
		r, ok := c.opts.Roles[req.Role]
		if !ok {
			return nil, &Error{Provider: c.name, Class: ClassBadRequest,
				Msg: fmt.Sprintf("%s: unknown role %q (known: %s)", ClassBadRequest, req.Role, roleNames(c.opts.Roles))}
		}
		systems = append(systems, r.System)
		roleCaps = r.Capabilities
		p.maxTurns = r.MaxTurns
	}
	if req.System != "" {
		systems = append(systems, req.System)
	}
	switch {
	case len(req.Permissions) > 0:
		p.caps = req.Permissions
	case roleCaps != nil:
		p.caps = roleCaps
	default:
		p.caps = DefaultCapabilities
	}
	if strings.EqualFold(req.Attrs["workflow_mode"], "planning") {
		p.planning = true
		p.caps = PlanningCapabilities(p.caps)
		systems = append(systems, "Workflow mode: planning. Write files only under docs/; do not create, change or delete anything else.")
	}
	p.system = strings.Join(systems, "\n\n")
	return p, nil
}

func roleNames(roles map[string]Role) string {
	names := make([]string, 0, len(roles))
	for n := range roles {
		names = append(names, n)
	}
	sortStrings(names)
	return strings.Join(names, ", ")
}

// env is the agent's environment: the parent's without CLAUDECODE (which
// makes Claude Code refuse to start inside another Claude Code), then the
// options' extras, then what tells the agent where it runs.
func (c *cli) env(req *Request) []string {
	extra := append([]string{}, c.opts.Env...)
	extra = append(extra,
		"SWITCHYARD_SESSION="+req.SessionID,
		"SWITCHYARD_NODE="+req.NodeID,
		"SWITCHYARD_ATTEMPT="+req.AttemptID,
	)
	if req.StageDir != "" {
		extra = append(extra, "SWITCHYARD_STAGE_DIR="+req.StageDir)
	}
	return proc.Environ([]string{"CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT"}, extra...)
}

// parser reads one CLI's output format.
type parser interface {
	// line handles one stdout line; it returns false for a line it cannot
	// read (which is skipped and noted).
	line(b []byte, emit func(Event)) bool
	// finish builds the result once the child has exited.
	finish(ex *proc.Exit, emit func(Event)) (*Result, error)
}

// rawParser is a parser that also wants blank lines (plain text output).
type rawParser interface{ raw() }

// execute runs the CLI with argv (stdin holds the prompt when it is not an
// argument) while p reads its output, and turns a cancelled run into an
// error that says so.
func (c *cli) execute(ctx context.Context, req *Request, args []string, stdin string, p parser, onEvent func(Event)) (*Result, error) {
	path, err := c.lookPath()
	if err != nil {
		return nil, err
	}
	emit := func(ev Event) {
		if onEvent != nil {
			onEvent(ev)
		}
	}
	start := time.Now()
	malformed := 0
	var firstBad string
	ex, err := proc.Run(ctx, proc.Spec{Path: path, Args: args, Dir: req.WorkDir,
		Env: c.env(req), Stdin: stdin, Grace: c.opts.Grace}, func(line []byte) {
		if _, raw := p.(rawParser); !raw && len(strings.TrimSpace(string(line))) == 0 {
			return
		}
		if !p.line(line, emit) {
			if malformed == 0 {
				firstBad = clip(string(line), 200)
			}
			malformed++
		}
	})
	if err != nil {
		return nil, &Error{Provider: c.name, Class: ClassUnknown, Err: err, Msg: fmt.Sprintf("start %s: %v", c.bin, err)}
	}
	if malformed > 0 {
		c.log.Warn("agent output lines skipped", "provider", c.name, "node", req.NodeID, "count", malformed, "first", firstBad)
	}
	if ex.Canceled {
		cause := ctx.Err()
		msg := "cancelled"
		if errors.Is(cause, context.DeadlineExceeded) {
			msg = fmt.Sprintf("killed at the node timeout after %s", time.Since(start).Round(time.Millisecond))
		}
		res, _ := p.finish(ex, emit)
		return res, &Error{Provider: c.name, Err: cause, Msg: msg + " (process group terminated)"}
	}
	res, err := p.finish(ex, emit)
	if res != nil && malformed > 0 {
		res.Notes = JoinNotes(res.Notes, fmt.Sprintf("skipped %d malformed output line(s), the first: %s", malformed, firstBad))
	}
	return res, err
}

// promptArg returns the prompt as an argument when it is short enough,
// else "" and the prompt for stdin.
func promptArg(prompt string) (arg, stdin string) {
	if len(prompt) <= maxArgPrompt {
		return prompt, ""
	}
	return "", prompt
}

// withSystem prefixes the prompt with system instructions, for CLIs that
// have no flag for them.
func withSystem(system, prompt string) string {
	if system == "" {
		return prompt
	}
	return "<system_instructions>\n" + system + "\n</system_instructions>\n\n" + prompt
}

// JoinNotes joins two notes with "; ", leaving out an empty one.
func JoinNotes(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// failure builds the error of a run that failed: the CLI's own error
// messages first, then the tail of stderr, then how the process ended.
func (c *cli) failure(ex *proc.Exit, msgs ...string) *Error {
	all := append([]string{}, msgs...)
	if t := lastLines(ex.Stderr, 5); t != "" {
		all = append(all, t)
	}
	switch {
	case ex.Signal != "":
		all = append(all, fmt.Sprintf("%s was killed by %s", c.bin, ex.Signal))
	case ex.Code != 0:
		all = append(all, fmt.Sprintf("%s exited with status %d", c.bin, ex.Code))
	default:
		all = append(all, fmt.Sprintf("%s ended without a result", c.bin))
	}
	return ClassError(c.name, all...)
}

// priced fills in u.Cost from the price table when the CLI reported none;
// it returns a note when the model has no price.
func (c *cli) priced(model string, u *Usage, cached int64) string {
	cost, ok := c.opts.Prices.Cost(model, u.InputTokens, cached, u.OutputTokens)
	if !ok {
		if u.InputTokens+u.OutputTokens == 0 {
			return ""
		}
		if model == "" {
			return "cost unknown: the model is not known (set llm_model)"
		}
		return fmt.Sprintf("cost unknown: no price for model %q", model)
	}
	u.Cost = cost
	return ""
}

func getenv(k string) string { return os.Getenv(k) }
