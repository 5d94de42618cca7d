package llmapi

import (
	"context"
	"fmt"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/switchyard/switchyard/nodes/agent"
)

// Anthropic runs a Claude model on the Messages API (ANTHROPIC_BASE_URL
// for another server). The key is ANTHROPIC_API_KEY, else
// ANTHROPIC_AUTH_TOKEN (sent as a bearer token).
type Anthropic struct{ base }

var (
	_ agent.Provider = (*Anthropic)(nil)
	_ agent.Checker  = (*Anthropic)(nil)
)

// NewAnthropic returns the anthropic provider.
func NewAnthropic(opts Options) *Anthropic {
	return &Anthropic{newBase("anthropic", credentials{
		key: []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"}, baseURL: []string{"ANTHROPIC_BASE_URL"},
		missing: "ANTHROPIC_API_KEY is not set (nor ANTHROPIC_AUTH_TOKEN)",
	}, opts)}
}

// thinkingBudgets maps reasoning_effort to an extended-thinking budget in
// tokens.
var thinkingBudgets = map[string]int64{"minimal": 1024, "low": 2048, "medium": 8192, "high": 24576, "xhigh": 32768, "max": 32768}

// client builds the SDK client of one run: credentials and base URL from
// the environment only (no profile files), the SDK's own retries off (the
// node's retry policy retries after the server's Retry-After).
func (p *Anthropic) client() anthropic.Client {
	// Without the SDK's environment defaults: the key and the base URL are
	// read here (Options.LookupEnv), and no profile file is loaded.
	opts := []option.RequestOption{option.WithoutEnvironmentDefaults(), option.WithHTTPClient(p.http), option.WithMaxRetries(0)}
	if key, name := p.env("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"); name == "ANTHROPIC_AUTH_TOKEN" {
		opts = append(opts, option.WithAuthToken(key))
	} else {
		opts = append(opts, option.WithAPIKey(key))
	}
	if u, _ := p.env("ANTHROPIC_BASE_URL"); u != "" {
		opts = append(opts, option.WithBaseURL(u))
	}
	return anthropic.NewClient(opts...)
}

// Run sends the prompt (with the role's instructions as the system
// prompt) and streams the answer. reasoning_effort turns on extended
// thinking with a budget (low 2048 tokens, medium 8192, high 24576),
// added to the answer's max_tokens.
func (p *Anthropic) Run(ctx context.Context, req *agent.Request, onEvent func(agent.Event)) (*agent.Result, error) {
	ctx, r, c, err := p.start(ctx, req, onEvent, DefaultAnthropicModel, DefaultMaxTokens)
	if err != nil {
		return nil, err
	}
	system, model, maxTokens := c.system, c.model, c.maxTokens
	params := anthropic.MessageNewParams{
		Model:     anthropic.Model(model),
		MaxTokens: maxTokens,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(req.Prompt))},
	}
	if system != "" {
		params.System = []anthropic.TextBlockParam{{Text: system}}
	}
	if e := strings.ToLower(req.ReasoningEffort); e != "" && e != "none" {
		budget, ok := thinkingBudgets[e]
		if !ok {
			return nil, &agent.Error{Provider: p.name, Class: agent.ClassBadRequest,
				Msg: fmt.Sprintf("%s: reasoning_effort=%q (want low, medium or high)", agent.ClassBadRequest, req.ReasoningEffort)}
		}
		params.Thinking = anthropic.ThinkingConfigParamOfEnabled(budget)
		params.MaxTokens += budget
	}
	client := p.client()
	stream := client.Messages.NewStreaming(ctx, params)
	defer stream.Close()
	var (
		stop                  string
		input, cached, output int64
		stopped               bool
	)
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "message_start":
			m := ev.Message
			if m.Model != "" {
				model = string(m.Model)
			}
			cached = m.Usage.CacheReadInputTokens
			input = m.Usage.InputTokens + m.Usage.CacheCreationInputTokens + cached
			output = m.Usage.OutputTokens
		case "content_block_delta":
			if ev.Delta.Type == "text_delta" {
				r.delta(ev.Delta.Text)
			}
		case "message_delta":
			// The usage of message_delta is cumulative.
			output = ev.Usage.OutputTokens
			if ev.Delta.StopReason != "" {
				stop = string(ev.Delta.StopReason)
			}
		case "message_stop":
			stopped = true
		}
	}
	if err := stream.Err(); err != nil {
		return nil, r.fail(ctx, err, 0)
	}
	if !stopped {
		return nil, r.fail(ctx, &streamFailure{"stream disconnected: the message ended without message_stop"}, 0)
	}
	switch stop {
	case "max_tokens":
		r.notes = append(r.notes, "the answer was cut at max_tokens")
	case "refusal":
		r.notes = append(r.notes, "the model refused to answer")
	}
	// No session id: the Messages API keeps no conversation to resume, so
	// a full-fidelity thread gets the context in its prompt instead.
	res := r.result(model, input, cached, output, "")
	if stop == "refusal" {
		res.Success = false
	}
	return res, nil
}
