package llmapi

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/switchyard/switchyard/nodes/agent"
)

// OpenAI runs a model of the OpenAI API, or of any server that speaks it
// (vLLM, Ollama, OpenRouter: OPENAI_BASE_URL). The key is OPENAI_API_KEY.
// It speaks the Responses API to api.openai.com and Chat Completions to
// other servers (most compatible servers speak only that), unless the
// node's openai_api (or SWITCHYARD_OPENAI_API) says "responses" or "chat".
type OpenAI struct{ base }

var (
	_ agent.Provider = (*OpenAI)(nil)
	_ agent.Checker  = (*OpenAI)(nil)
)

// NewOpenAI returns the openai provider.
func NewOpenAI(opts Options) *OpenAI {
	return &OpenAI{newBase("openai", credentials{
		key: []string{"OPENAI_API_KEY"}, baseURL: []string{"OPENAI_BASE_URL"},
		missing: "OPENAI_API_KEY is not set (or set OPENAI_BASE_URL to an OpenAI-compatible server)",
	}, opts)}
}

// api is the API a request speaks: "responses" or "chat".
func (p *OpenAI) api(req *agent.Request) (string, error) {
	api := strings.ToLower(strings.TrimSpace(req.Attrs["openai_api"]))
	if api == "" {
		api, _ = p.env("SWITCHYARD_OPENAI_API")
		api = strings.ToLower(api)
	}
	switch api {
	case "responses", "chat":
		return api, nil
	case "":
		baseURL, _ := p.env("OPENAI_BASE_URL")
		if u, err := url.Parse(baseURL); baseURL == "" || (err == nil && u.Host == "api.openai.com") {
			return "responses", nil
		}
		return "chat", nil
	}
	return "", &agent.Error{Provider: p.name, Class: agent.ClassBadRequest,
		Msg: fmt.Sprintf("%s: openai_api=%q (want responses or chat)", agent.ClassBadRequest, api)}
}

// client builds the SDK client of one run: the key and base URL from the
// environment, the SDK's own retries off (the node's retry policy retries,
// on the session's clock, after the server's Retry-After).
func (p *OpenAI) client() openai.Client {
	opts := []option.RequestOption{option.WithHTTPClient(p.http), option.WithMaxRetries(0)}
	if key, _ := p.env("OPENAI_API_KEY"); key != "" {
		opts = append(opts, option.WithAPIKey(key))
	} else {
		opts = append(opts, option.WithAPIKey("none")) // compatible servers that want no key
	}
	if u, _ := p.env("OPENAI_BASE_URL"); u != "" {
		opts = append(opts, option.WithBaseURL(u))
	}
	return openai.NewClient(opts...)
}

// Run sends the prompt (with the role's instructions as the system
// prompt) and streams the answer. On the Responses API the response id is
// the run's session id, and a request that resumes one continues it
// (previous_response_id): a thread under fidelity full.
func (p *OpenAI) Run(ctx context.Context, req *agent.Request, onEvent func(agent.Event)) (*agent.Result, error) {
	ctx, r, c, err := p.start(ctx, req, onEvent, DefaultOpenAIModel, 0)
	if err != nil {
		return nil, err
	}
	system, model, maxTokens := c.system, c.model, c.maxTokens
	api, err := p.api(req)
	if err != nil {
		return nil, err
	}
	client := p.client()
	if api == "chat" {
		return p.chat(ctx, r, client, req, system, model, maxTokens)
	}
	params := responses.ResponseNewParams{
		Model: model,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(req.Prompt)},
	}
	if system != "" {
		params.Instructions = openai.String(system)
	}
	if maxTokens > 0 {
		params.MaxOutputTokens = openai.Int(maxTokens)
	}
	if e := req.ReasoningEffort; e != "" {
		params.Reasoning = shared.ReasoningParam{Effort: shared.ReasoningEffort(strings.ToLower(e))}
	}
	if req.ResumeSession != "" {
		// The thread goes on from the stored response (fidelity full).
		params.PreviousResponseID = openai.String(req.ResumeSession)
	}
	stream := client.Responses.NewStreaming(ctx, params)
	defer stream.Close()
	var done *responses.Response
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "response.output_text.delta":
			r.delta(ev.Delta)
		case "response.completed", "response.incomplete":
			resp := ev.Response
			done = &resp
		case "response.failed":
			msg := ev.Response.Error.Message
			if c := string(ev.Response.Error.Code); c != "" {
				msg = c + ": " + msg
			}
			return nil, r.fail(ctx, &streamFailure{"response failed: " + msg}, 0)
		case "error":
			msg := ev.Message
			if ev.Code != "" {
				msg = ev.Code + ": " + msg
			}
			return nil, r.fail(ctx, &streamFailure{msg}, 0)
		}
	}
	if err := stream.Err(); err != nil {
		return nil, r.fail(ctx, err, 0)
	}
	if done == nil {
		return nil, r.fail(ctx, &streamFailure{"stream disconnected: the response ended without response.completed"}, 0)
	}
	if done.Status == "incomplete" {
		r.notes = append(r.notes, "the answer is incomplete: "+string(done.IncompleteDetails.Reason))
	}
	if done.Model != "" {
		model = string(done.Model)
	}
	u := done.Usage
	return r.result(model, u.InputTokens, u.InputTokensDetails.CachedTokens, u.OutputTokens, done.ID), nil
}

// chat runs the request on Chat Completions, streaming, with the usage
// reported in the last chunk.
func (p *OpenAI) chat(ctx context.Context, r *run, client openai.Client, req *agent.Request, system, model string, maxTokens int64) (*agent.Result, error) {
	var msgs []openai.ChatCompletionMessageParamUnion
	if system != "" {
		msgs = append(msgs, openai.SystemMessage(system))
	}
	msgs = append(msgs, openai.UserMessage(req.Prompt))
	params := openai.ChatCompletionNewParams{
		Model:         model,
		Messages:      msgs,
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	if maxTokens > 0 {
		params.MaxCompletionTokens = openai.Int(maxTokens)
	}
	if e := req.ReasoningEffort; e != "" {
		params.ReasoningEffort = shared.ReasoningEffort(strings.ToLower(e))
	}
	stream := client.Chat.Completions.NewStreaming(ctx, params)
	defer stream.Close()
	var (
		finish                string
		input, cached, output int64
		chunks                int
	)
	for stream.Next() {
		c := stream.Current()
		chunks++
		if c.Model != "" {
			model = c.Model
		}
		for _, ch := range c.Choices {
			r.delta(ch.Delta.Content)
			if ch.FinishReason != "" {
				finish = string(ch.FinishReason)
			}
		}
		if c.Usage.PromptTokens != 0 || c.Usage.CompletionTokens != 0 {
			input, cached, output = c.Usage.PromptTokens, c.Usage.PromptTokensDetails.CachedTokens, c.Usage.CompletionTokens
		}
	}
	if err := stream.Err(); err != nil {
		return nil, r.fail(ctx, err, 0)
	}
	if finish == "" {
		return nil, r.fail(ctx, &streamFailure{fmt.Sprintf("stream disconnected: the answer ended without a finish reason (%d chunks)", chunks)}, 0)
	}
	switch finish {
	case "length":
		r.notes = append(r.notes, "the answer was cut at the token limit")
	case "content_filter":
		r.notes = append(r.notes, "the answer was stopped by the content filter")
	}
	// No session id: Chat Completions keeps no conversation to resume.
	return r.result(model, input, cached, output, ""), nil
}
