package agent

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/switchyard/switchyard/nodes/agent/internal/proc"
)

// Claude runs Claude Code in print mode with stream-json output:
//
//	claude -p --output-format stream-json --verbose [--model M] [--effort E]
//	  [--append-system-prompt S] [--max-turns N] [--resume ID]
//	  --permission-mode MODE [--allowedTools T,…]   (prompt on stdin)
//
// It reports Claude Code's own cost (total_cost_usd).
type Claude struct{ cli }

var (
	_ Provider = (*Claude)(nil)
	_ Checker  = (*Claude)(nil)
)

// NewClaude returns the claude provider.
func NewClaude(opts CLIOptions) *Claude {
	return &Claude{newCLI("claude", "claude", "install Claude Code: npm install -g @anthropic-ai/claude-code", opts)}
}

// Name is "claude".
func (c *Claude) Name() string { return "claude" }

// Run runs one Claude Code session (or resumes req.ResumeSession).
func (c *Claude) Run(ctx context.Context, req *Request, onEvent func(Event)) (*Result, error) {
	pl, err := c.plan(req)
	if err != nil {
		return nil, err
	}
	return c.execute(ctx, req, c.args(req, pl), req.Prompt, &claudeParser{c: c, model: pl.model}, onEvent)
}

// args builds the argv (the prompt goes on stdin: Claude Code reads it
// there in print mode, and no prompt can be mistaken for a flag).
func (c *Claude) args(req *Request, pl *plan) []string {
	args := []string{"-p", "--output-format", "stream-json", "--verbose"}
	if pl.model != "" {
		args = append(args, "--model", pl.model)
	}
	if e := req.ReasoningEffort; e != "" {
		args = append(args, "--effort", e)
	}
	if pl.system != "" {
		args = append(args, "--append-system-prompt", pl.system)
	}
	if pl.maxTurns > 0 {
		args = append(args, "--max-turns", strconv.Itoa(pl.maxTurns))
	}
	if req.ResumeSession != "" {
		args = append(args, "--resume", req.ResumeSession)
	}
	mode, tools := claudePermissions(pl.caps)
	args = append(args, "--permission-mode", mode)
	if len(tools) > 0 {
		args = append(args, "--allowedTools", strings.Join(tools, ","))
	}
	return append(args, c.opts.Args...)
}

// claudePermissions maps capabilities onto a permission mode and the
// tools allowed without asking (in print mode anything else is denied).
func claudePermissions(caps []string) (mode string, tools []string) {
	has := map[string]bool{}
	for _, c := range caps {
		has[c] = true
	}
	if has[CapAll] {
		return "bypassPermissions", nil
	}
	tools = []string{"Read", "Glob", "Grep", "LS", "TodoWrite"}
	dirs, editAll := editDirs(caps)
	mode = "default"
	if editAll {
		mode = "acceptEdits"
		tools = append(tools, "Edit", "MultiEdit", "Write", "NotebookEdit")
	} else {
		for _, d := range dirs {
			for _, t := range []string{"Edit", "MultiEdit", "Write"} {
				tools = append(tools, t+"("+d+"**)")
			}
		}
	}
	if has[CapShell] {
		tools = append(tools, "Bash")
	}
	if has[CapNetwork] {
		tools = append(tools, "WebFetch", "WebSearch")
	}
	return mode, tools
}

// claudeEvent is one line of stream-json output; only the fields used.
type claudeEvent struct {
	Type      string          `json:"type"`
	Subtype   string          `json:"subtype"`
	SessionID string          `json:"session_id"`
	Model     string          `json:"model"`
	Message   *claudeMessage  `json:"message"`
	Event     *claudeStreamEv `json:"event"` // type "stream_event" (--include-partial-messages)
	// type "result"
	IsError      bool         `json:"is_error"`
	Result       string       `json:"result"`
	TotalCostUSD *float64     `json:"total_cost_usd"`
	Usage        *claudeUsage `json:"usage"`
	NumTurns     int          `json:"num_turns"`
	Errors       []string     `json:"errors"`
}

type claudeMessage struct {
	Model   string `json:"model"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
		Name string `json:"name"`
	} `json:"content"`
}

type claudeStreamEv struct {
	Type  string `json:"type"`
	Delta struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"delta"`
}

type claudeUsage struct {
	InputTokens         int64 `json:"input_tokens"`
	CacheCreationTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadTokens     int64 `json:"cache_read_input_tokens"`
	OutputTokens        int64 `json:"output_tokens"`
}

type claudeParser struct {
	c         *Claude
	model     string
	sessionID string
	texts     []string
	tools     []string
	partial   bool // text came as stream_event deltas
	final     *claudeEvent
}

func (p *claudeParser) line(b []byte, emit func(Event)) bool {
	var ev claudeEvent
	if err := json.Unmarshal(b, &ev); err != nil || ev.Type == "" {
		return false
	}
	if ev.SessionID != "" {
		p.sessionID = ev.SessionID
	}
	switch ev.Type {
	case "system":
		if ev.Model != "" && p.model == "" {
			p.model = ev.Model
		}
	case "stream_event":
		if ev.Event != nil && ev.Event.Delta.Type == "text_delta" && ev.Event.Delta.Text != "" {
			p.partial = true
			emit(Event{Kind: "text", Text: ev.Event.Delta.Text})
		}
	case "assistant":
		if ev.Message == nil {
			return true
		}
		if ev.Message.Model != "" && p.model == "" {
			p.model = ev.Message.Model
		}
		for _, c := range ev.Message.Content {
			switch c.Type {
			case "text":
				p.texts = append(p.texts, c.Text)
				if !p.partial {
					emit(Event{Kind: "text", Text: c.Text})
				}
			case "tool_use":
				p.tools = append(p.tools, c.Name)
				emit(Event{Kind: "tool_call", Tool: c.Name})
			}
		}
	case "result":
		p.final = &ev
	}
	return true
}

func (p *claudeParser) finish(ex *proc.Exit, emit func(Event)) (*Result, error) {
	res := &Result{SessionID: p.sessionID, ToolCalls: p.tools, Text: strings.Join(p.texts, "\n\n")}
	f := p.final
	if f != nil {
		if f.Result != "" {
			res.Text = f.Result
		}
		if u := f.Usage; u != nil {
			res.Usage = Usage{InputTokens: u.InputTokens + u.CacheCreationTokens + u.CacheReadTokens, OutputTokens: u.OutputTokens}
			if f.TotalCostUSD != nil {
				res.Usage.Cost = *f.TotalCostUSD
			} else {
				res.Notes = JoinNotes(res.Notes, p.c.priced(p.model, &res.Usage, u.CacheReadTokens))
			}
		} else if f.TotalCostUSD != nil {
			res.Usage.Cost = *f.TotalCostUSD
		}
		if res.Usage != (Usage{}) {
			emit(Event{Kind: "usage", Usage: res.Usage})
		}
	}
	if ex.Canceled {
		return res, nil
	}
	switch {
	case f == nil:
		return res, p.c.failure(ex)
	case f.Subtype == "error_max_turns":
		res.Notes = JoinNotes(res.Notes, "stopped at the maximum number of turns")
		return res, nil
	case f.IsError || strings.HasPrefix(f.Subtype, "error"):
		return res, p.c.failure(ex, append([]string{f.Result}, f.Errors...)...)
	case ex.Code != 0:
		return res, p.c.failure(ex)
	}
	res.Success = true
	return res, nil
}
