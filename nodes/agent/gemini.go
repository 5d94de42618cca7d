package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/switchyard/switchyard/nodes/agent/internal/proc"
)

// Gemini runs the Gemini CLI headless with streamed JSON events:
//
//	gemini --output-format stream-json [--model M] --approval-mode MODE
//	  [--resume ID] --prompt=PROMPT
//
// The single-object --output-format json is read too (when set through
// CLIOptions.Args). Gemini reports tokens but no cost: the cost comes
// from the price table. It has no reasoning-effort flag.
type Gemini struct{ cli }

var (
	_ Provider = (*Gemini)(nil)
	_ Checker  = (*Gemini)(nil)
)

// NewGemini returns the gemini-cli provider. (The provider "gemini" calls
// the Gemini API: package llmapi.)
func NewGemini(opts CLIOptions) *Gemini {
	return &Gemini{newCLI("gemini-cli", "gemini", "install the Gemini CLI: npm install -g @google/gemini-cli", opts)}
}

// Name is "gemini-cli".
func (g *Gemini) Name() string { return "gemini-cli" }

// Run runs one Gemini session (or resumes req.ResumeSession).
func (g *Gemini) Run(ctx context.Context, req *Request, onEvent func(Event)) (*Result, error) {
	pl, err := g.plan(req)
	if err != nil {
		return nil, err
	}
	args, stdin := g.args(req, pl)
	return g.execute(ctx, req, args, stdin, &geminiParser{g: g, model: pl.model}, onEvent)
}

// args builds the argv. System instructions lead the prompt (the CLI's
// GEMINI_SYSTEM_MD would replace its own system prompt, not add to it).
// A prompt too long for an argument goes on stdin, which the CLI adds to
// the --prompt text.
func (g *Gemini) args(req *Request, pl *plan) ([]string, string) {
	args := []string{"--output-format", "stream-json"}
	if pl.model != "" {
		args = append(args, "--model", pl.model)
	}
	args = append(args, "--approval-mode", geminiApproval(pl.caps))
	if req.ResumeSession != "" {
		args = append(args, "--resume", req.ResumeSession)
	}
	args = append(args, g.opts.Args...)
	arg, stdin := promptArg(withSystem(pl.system, req.Prompt))
	if stdin != "" {
		arg = "Follow the instructions given on standard input."
	}
	return append(args, "--prompt="+arg), stdin
}

// geminiApproval maps capabilities onto an approval mode: yolo for shell
// or all, auto_edit for edits (the CLI cannot narrow them to a directory:
// an edit:DIR capability is stated in the prompt only), default otherwise
// (tools that need approval are unavailable headless).
func geminiApproval(caps []string) string {
	has := map[string]bool{}
	for _, c := range caps {
		has[c] = true
	}
	dirs, editAll := editDirs(caps)
	switch {
	case has[CapAll] || has[CapShell]:
		return "yolo"
	case editAll || len(dirs) > 0:
		return "auto_edit"
	}
	return "default"
}

// geminiEvent is one stream-json event; only the fields used.
type geminiEvent struct {
	Type      string          `json:"type"`
	SessionID string          `json:"session_id"`
	Model     string          `json:"model"`
	Role      string          `json:"role"`
	Content   string          `json:"content"`
	Delta     bool            `json:"delta"`
	ToolName  string          `json:"tool_name"`
	Severity  string          `json:"severity"`
	Message   string          `json:"message"`
	Status    string          `json:"status"`
	Error     *geminiError    `json:"error"`
	Stats     *geminiStreamSt `json:"stats"`
}

type geminiError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Code    any    `json:"code"`
}

type geminiStreamSt struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	Cached       int64 `json:"cached"`
}

// geminiJSON is the single object of --output-format json.
type geminiJSON struct {
	SessionID string       `json:"session_id"`
	Response  *string      `json:"response"`
	Error     *geminiError `json:"error"`
	Stats     *struct {
		Models map[string]struct {
			Tokens struct {
				Prompt     int64 `json:"prompt"`
				Candidates int64 `json:"candidates"`
				Cached     int64 `json:"cached"`
				Thoughts   int64 `json:"thoughts"`
			} `json:"tokens"`
		} `json:"models"`
	} `json:"stats"`
}

type geminiParser struct {
	g         *Gemini
	model     string
	sessionID string
	text      strings.Builder
	tools     []string
	warnings  []string
	result    *geminiEvent
	events    int
	other     bytes.Buffer // lines that are not events: a json-format object, or junk
	otherN    int
}

func (p *geminiParser) line(b []byte, emit func(Event)) bool {
	var ev geminiEvent
	if err := json.Unmarshal(b, &ev); err != nil || ev.Type == "" {
		if p.other.Len() < 8<<20 {
			p.other.Write(b)
			p.other.WriteByte('\n')
		}
		p.otherN++
		return true // judged in finish: part of a json-format object or not
	}
	p.events++
	if ev.SessionID != "" {
		p.sessionID = ev.SessionID
	}
	switch ev.Type {
	case "init":
		if ev.Model != "" && p.model == "" {
			p.model = ev.Model
		}
	case "message":
		if ev.Role == "assistant" && ev.Content != "" {
			if !ev.Delta && p.text.Len() > 0 {
				p.text.WriteString("\n\n")
			}
			p.text.WriteString(ev.Content)
			emit(Event{Kind: "text", Text: ev.Content})
		}
	case "tool_use":
		p.tools = append(p.tools, ev.ToolName)
		emit(Event{Kind: "tool_call", Tool: ev.ToolName})
	case "error":
		p.warnings = append(p.warnings, strings.TrimSpace(ev.Severity+": "+ev.Message))
	case "result":
		p.result = &ev
	}
	return true
}

func (p *geminiParser) finish(ex *proc.Exit, emit func(Event)) (*Result, error) {
	res := &Result{Text: p.text.String(), SessionID: p.sessionID, ToolCalls: p.tools}
	var errMsgs []string
	status := ""
	var cached int64
	if p.events == 0 && p.otherN > 0 {
		var j geminiJSON
		if err := json.Unmarshal(p.other.Bytes(), &j); err == nil && (j.Response != nil || j.Error != nil || j.Stats != nil) {
			p.otherN = 0
			if j.SessionID != "" {
				res.SessionID = j.SessionID
			}
			if j.Response != nil {
				res.Text = *j.Response
				emit(Event{Kind: "text", Text: res.Text})
				status = "success"
			}
			if j.Stats != nil {
				for _, m := range j.Stats.Models {
					res.Usage.InputTokens += m.Tokens.Prompt
					res.Usage.OutputTokens += m.Tokens.Candidates + m.Tokens.Thoughts
					cached += m.Tokens.Cached
				}
			}
			if j.Error != nil {
				status = "error"
				errMsgs = append(errMsgs, j.Error.Message)
			}
		}
	}
	if r := p.result; r != nil {
		status = r.Status
		if r.Stats != nil {
			res.Usage.InputTokens, res.Usage.OutputTokens, cached = r.Stats.InputTokens, r.Stats.OutputTokens, r.Stats.Cached
		}
		if r.Error != nil {
			errMsgs = append(errMsgs, r.Error.Message)
		}
	}
	if res.Usage != (Usage{}) {
		res.Notes = JoinNotes(res.Notes, p.g.priced(p.model, &res.Usage, cached))
		emit(Event{Kind: "usage", Usage: res.Usage})
	}
	if p.otherN > 0 {
		res.Notes = JoinNotes(res.Notes, "skipped "+strconv.Itoa(p.otherN)+" malformed output line(s), the first: "+clip(firstLine(p.other.String()), 200))
		p.g.log.Warn("agent output lines skipped", "provider", "gemini-cli", "count", p.otherN)
	}
	if ex.Canceled {
		return res, nil
	}
	if status != "success" || ex.Code != 0 {
		return res, p.g.failure(ex, append(errMsgs, reverse(p.warnings)...)...)
	}
	res.Success = true
	return res, nil
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
