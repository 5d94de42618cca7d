package agent

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/switchyard/switchyard/nodes/agent/internal/proc"
)

// Codex runs the Codex CLI non-interactively with JSONL events:
//
//	codex exec --json --skip-git-repo-check --sandbox MODE [-c …] [--model M]
//	  [-c model_reasoning_effort=E] [resume ID] -    (prompt on stdin)
//
// Codex reports tokens but no cost: the cost comes from the price table.
type Codex struct{ cli }

var (
	_ Provider = (*Codex)(nil)
	_ Checker  = (*Codex)(nil)
)

// NewCodex returns the codex provider.
func NewCodex(opts CLIOptions) *Codex {
	return &Codex{newCLI("codex", "codex", "install the Codex CLI: npm install -g @openai/codex", opts)}
}

// Name is "codex".
func (c *Codex) Name() string { return "codex" }

// Run runs one Codex thread (or resumes req.ResumeSession).
func (c *Codex) Run(ctx context.Context, req *Request, onEvent func(Event)) (*Result, error) {
	pl, err := c.plan(req)
	if err != nil {
		return nil, err
	}
	return c.execute(ctx, req, c.args(req, pl), withSystem(pl.system, req.Prompt), &codexParser{c: c, model: pl.model}, onEvent)
}

// args builds the argv. Codex has no flag for system instructions, so they
// lead the prompt; "-" reads the prompt from stdin.
func (c *Codex) args(req *Request, pl *plan) []string {
	args := []string{"exec", "--json", "--skip-git-repo-check"}
	args = append(args, codexSandbox(pl.caps)...)
	if pl.model != "" {
		args = append(args, "--model", pl.model)
	}
	if e := req.ReasoningEffort; e != "" {
		args = append(args, "-c", "model_reasoning_effort="+strconvQuote(e))
	}
	args = append(args, c.opts.Args...)
	if req.ResumeSession != "" {
		args = append(args, "resume", req.ResumeSession)
	}
	return append(args, "-")
}

// codexSandbox maps capabilities onto the sandbox: read-only unless edits
// are granted, workspace-write for edits (Codex cannot narrow writes to a
// directory: an edit:DIR capability is stated in the prompt only),
// danger-full-access for all; network opens the workspace sandbox's network.
func codexSandbox(caps []string) []string {
	has := map[string]bool{}
	for _, c := range caps {
		has[c] = true
	}
	if has[CapAll] {
		return []string{"--sandbox", "danger-full-access"}
	}
	dirs, editAll := editDirs(caps)
	if !editAll && len(dirs) == 0 {
		return []string{"--sandbox", "read-only"}
	}
	args := []string{"--sandbox", "workspace-write"}
	if has[CapNetwork] {
		args = append(args, "-c", "sandbox_workspace_write.network_access=true")
	}
	return args
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// codexEvent is one JSONL event of codex exec --json; only the fields used.
type codexEvent struct {
	Type     string `json:"type"`
	ThreadID string `json:"thread_id"`
	Message  string `json:"message"` // type "error"
	Error    *struct {
		Message string `json:"message"`
	} `json:"error"` // type "turn.failed"
	Usage *struct {
		InputTokens       int64 `json:"input_tokens"`
		CachedInputTokens int64 `json:"cached_input_tokens"`
		OutputTokens      int64 `json:"output_tokens"`
	} `json:"usage"` // type "turn.completed"
	Item *struct {
		ID      string `json:"id"`
		Type    string `json:"type"`
		Text    string `json:"text"`
		Command string `json:"command"`
		Server  string `json:"server"`
		Tool    string `json:"tool"`
		Query   string `json:"query"`
		Message string `json:"message"`
	} `json:"item"`
}

type codexParser struct {
	c         *Codex
	model     string
	threadID  string
	last      string // the last agent message: the answer
	tools     []string
	started   map[string]bool // tool items already reported
	usage     Usage
	cached    int64
	completed bool
	failed    []string // turn.failed and error messages
	notes     []string
}

func (p *codexParser) line(b []byte, emit func(Event)) bool {
	var ev codexEvent
	if err := json.Unmarshal(b, &ev); err != nil || ev.Type == "" {
		return false
	}
	switch ev.Type {
	case "thread.started":
		p.threadID = ev.ThreadID
	case "turn.completed":
		p.completed = true
		if u := ev.Usage; u != nil {
			d := Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens}
			if n := p.c.priced(p.model, &d, u.CachedInputTokens); n != "" && !containsString(p.notes, n) {
				p.notes = append(p.notes, n)
			}
			p.usage = p.usage.Add(d)
			p.cached += u.CachedInputTokens
			emit(Event{Kind: "usage", Usage: d})
		}
	case "turn.failed":
		if ev.Error != nil {
			p.failed = append(p.failed, ev.Error.Message)
		}
	case "error":
		p.failed = append(p.failed, ev.Message)
	case "item.started", "item.updated", "item.completed":
		if ev.Item != nil {
			p.item(ev.Type, ev, emit)
		}
	}
	return true
}

func (p *codexParser) item(kind string, ev codexEvent, emit func(Event)) {
	it := ev.Item
	tool := ""
	switch it.Type {
	case "agent_message":
		if kind == "item.completed" {
			p.last = it.Text
			emit(Event{Kind: "text", Text: it.Text})
		}
		return
	case "error":
		if kind == "item.completed" {
			p.notes = append(p.notes, it.Message)
		}
		return
	case "command_execution":
		tool = "shell: " + it.Command
	case "file_change":
		tool = "edit"
	case "mcp_tool_call":
		tool = it.Server + "." + it.Tool
	case "web_search":
		tool = "web_search: " + it.Query
	default:
		return
	}
	if p.started == nil {
		p.started = map[string]bool{}
	}
	if it.ID != "" && p.started[it.ID] {
		return
	}
	p.started[it.ID] = true
	p.tools = append(p.tools, tool)
	emit(Event{Kind: "tool_call", Tool: tool})
}

func (p *codexParser) finish(ex *proc.Exit, emit func(Event)) (*Result, error) {
	res := &Result{Text: p.last, SessionID: p.threadID, ToolCalls: p.tools, Usage: p.usage,
		Notes: strings.Join(p.notes, "; ")}
	if ex.Canceled {
		return res, nil
	}
	if ex.Code != 0 || !p.completed {
		// Codex reports transient stream errors as "error" events and then
		// retries; only a run without a completed turn failed.
		return res, p.c.failure(ex, reverse(p.failed)...)
	}
	res.Success = true
	return res, nil
}

func reverse(s []string) []string {
	out := make([]string, 0, len(s))
	for i := len(s) - 1; i >= 0; i-- {
		out = append(out, s[i])
	}
	return out
}

func containsString(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
