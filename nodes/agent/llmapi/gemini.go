package llmapi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/genai"

	"github.com/switchyard/switchyard/nodes/agent"
)

// Gemini runs a Gemini model on the Gemini API (GEMINI_BASE_URL, else
// GOOGLE_GEMINI_BASE_URL, for another server). The key is GEMINI_API_KEY,
// else GOOGLE_API_KEY. (The Gemini CLI is the provider gemini-cli.)
type Gemini struct{ base }

var (
	_ agent.Provider = (*Gemini)(nil)
	_ agent.Checker  = (*Gemini)(nil)
)

// NewGemini returns the gemini provider.
func NewGemini(opts Options) *Gemini {
	return &Gemini{newBase("gemini", credentials{
		key: []string{"GEMINI_API_KEY", "GOOGLE_API_KEY"}, baseURL: []string{"GEMINI_BASE_URL", "GOOGLE_GEMINI_BASE_URL"},
		missing: "GEMINI_API_KEY is not set (nor GOOGLE_API_KEY)",
	}, opts)}
}

// thoughtBudgets maps reasoning_effort to a thinking budget in tokens.
var thoughtBudgets = map[string]int32{"none": 0, "minimal": 512, "low": 1024, "medium": 8192, "high": 24576, "xhigh": 32768, "max": 32768}

// Run sends the prompt (with the role's instructions as the system
// instruction) and streams the answer. reasoning_effort sets the thinking
// budget (none 0, low 1024 tokens, medium 8192, high 24576).
func (p *Gemini) Run(ctx context.Context, req *agent.Request, onEvent func(agent.Event)) (*agent.Result, error) {
	ctx, r, c, err := p.start(ctx, req, onEvent, DefaultGeminiModel, 0)
	if err != nil {
		return nil, err
	}
	system, model, maxTokens := c.system, c.model, c.maxTokens
	cfg := &genai.GenerateContentConfig{}
	if system != "" {
		cfg.SystemInstruction = genai.NewContentFromText(system, genai.RoleUser)
	}
	if maxTokens > 0 {
		cfg.MaxOutputTokens = int32(min(maxTokens, 1<<31-1))
	}
	if e := strings.ToLower(req.ReasoningEffort); e != "" {
		budget, ok := thoughtBudgets[e]
		if !ok {
			return nil, &agent.Error{Provider: p.name, Class: agent.ClassBadRequest,
				Msg: fmt.Sprintf("%s: reasoning_effort=%q (want none, low, medium or high)", agent.ClassBadRequest, req.ReasoningEffort)}
		}
		cfg.ThinkingConfig = &genai.ThinkingConfig{ThinkingBudget: &budget}
	}
	key, _ := p.env("GEMINI_API_KEY", "GOOGLE_API_KEY")
	if key == "" {
		key = "none" // a server of GEMINI_BASE_URL that wants none
	}
	cc := &genai.ClientConfig{APIKey: key, Backend: genai.BackendGeminiAPI, HTTPClient: p.http}
	if u, _ := p.env("GEMINI_BASE_URL", "GOOGLE_GEMINI_BASE_URL"); u != "" {
		cc.HTTPOptions.BaseURL = u
	}
	// No RetryOptions: the SDK does not retry; the node's retry policy does.
	client, err := genai.NewClient(ctx, cc)
	if err != nil {
		return nil, r.fail(ctx, err, 0)
	}
	var (
		finish, blocked       string
		input, cached, output int64
		chunks                int
	)
	for resp, err := range client.Models.GenerateContentStream(ctx, model, genai.Text(req.Prompt), cfg) {
		if err != nil {
			return nil, r.fail(ctx, err, geminiRetryDelay(err))
		}
		chunks++
		if resp.ModelVersion != "" {
			model = resp.ModelVersion
		}
		if pf := resp.PromptFeedback; pf != nil && pf.BlockReason != "" {
			blocked = string(pf.BlockReason)
		}
		if len(resp.Candidates) > 0 && resp.Candidates[0] != nil {
			c := resp.Candidates[0]
			if c.Content != nil {
				for _, part := range c.Content.Parts {
					if part != nil && !part.Thought {
						r.delta(part.Text)
					}
				}
			}
			if c.FinishReason != "" {
				finish = string(c.FinishReason)
			}
		}
		if u := resp.UsageMetadata; u != nil {
			// Thinking tokens are billed as output.
			input, cached = int64(u.PromptTokenCount)+int64(u.ToolUsePromptTokenCount), int64(u.CachedContentTokenCount)
			output = int64(u.CandidatesTokenCount) + int64(u.ThoughtsTokenCount)
		}
	}
	if ctx.Err() != nil {
		return nil, r.fail(ctx, ctx.Err(), 0)
	}
	if finish == "" && blocked == "" {
		return nil, r.fail(ctx, &streamFailure{fmt.Sprintf("stream disconnected: the answer ended without a finish reason (%d chunks)", chunks)}, 0)
	}
	// No session id: generateContent keeps no conversation to resume.
	res := r.result(model, input, cached, output, "")
	switch {
	case blocked != "":
		res.Success = false
		res.Notes = agent.JoinNotes(res.Notes, "the prompt was blocked: "+blocked)
	case finish == "MAX_TOKENS":
		res.Notes = agent.JoinNotes(res.Notes, "the answer was cut at the token limit")
	case finish == "SAFETY" || finish == "PROHIBITED_CONTENT" || finish == "BLOCKLIST" || finish == "SPII":
		res.Success = false
		res.Notes = agent.JoinNotes(res.Notes, "the answer was stopped: "+finish)
	}
	return res, nil
}

// geminiRetryDelay reads the retryDelay of a google.rpc.RetryInfo in an
// API error's details ("30s"), 0 when there is none.
func geminiRetryDelay(err error) time.Duration {
	var ae genai.APIError
	if !errors.As(err, &ae) {
		var pae *genai.APIError
		if !errors.As(err, &pae) || pae == nil {
			return 0
		}
		ae = *pae
	}
	for _, d := range ae.Details {
		if t, _ := d["@type"].(string); !strings.HasSuffix(t, "google.rpc.RetryInfo") {
			continue
		}
		if s, ok := d["retryDelay"].(string); ok {
			if dur, err := time.ParseDuration(s); err == nil && dur > 0 {
				return min(dur, maxRetryAfter)
			}
		}
	}
	return 0
}
