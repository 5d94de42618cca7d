package llmapi_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/nodes/agent"
	"github.com/switchyard/switchyard/nodes/agent/agenttest"
	"github.com/switchyard/switchyard/nodes/agent/llmapi"
	"github.com/switchyard/switchyard/nodes/agent/llmapi/llmapitest"
)

// vendor is one provider pointed at the fake server.
type vendor struct {
	name   string // test name
	wire   string // what the server must see (llmapitest.Request.Vendor)
	model  string
	env    func(s *llmapitest.Server) map[string]string
	ctor   func(llmapi.Options) agent.Provider
	header func(h http.Header) string // the credential the request carried
}

var vendors = []vendor{
	{name: "openai responses", wire: "openai-responses", model: "gpt-5",
		env: func(s *llmapitest.Server) map[string]string {
			return map[string]string{"OPENAI_BASE_URL": s.OpenAIURL(), "OPENAI_API_KEY": "sk-test", "SWITCHYARD_OPENAI_API": "responses"}
		},
		ctor: func(o llmapi.Options) agent.Provider { return llmapi.NewOpenAI(o) }, header: func(h http.Header) string { return h.Get("Authorization") }},
	{name: "openai chat", wire: "openai-chat", model: "llama3.1",
		env: func(s *llmapitest.Server) map[string]string {
			return map[string]string{"OPENAI_BASE_URL": s.OpenAIURL(), "OPENAI_API_KEY": "sk-test"}
		},
		ctor: func(o llmapi.Options) agent.Provider { return llmapi.NewOpenAI(o) }, header: func(h http.Header) string { return h.Get("Authorization") }},
	{name: "anthropic", wire: "anthropic", model: "claude-sonnet-4-5",
		env: func(s *llmapitest.Server) map[string]string {
			return map[string]string{"ANTHROPIC_BASE_URL": s.URL, "ANTHROPIC_API_KEY": "sk-test"}
		},
		ctor: func(o llmapi.Options) agent.Provider { return llmapi.NewAnthropic(o) }, header: func(h http.Header) string { return h.Get("X-Api-Key") }},
	{name: "gemini", wire: "gemini", model: "gemini-2.5-flash",
		env: func(s *llmapitest.Server) map[string]string {
			return map[string]string{"GEMINI_BASE_URL": s.URL, "GEMINI_API_KEY": "sk-test"}
		},
		ctor: func(o llmapi.Options) agent.Provider { return llmapi.NewGemini(o) }, header: func(h http.Header) string { return h.Get("X-Goog-Api-Key") }},
}

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// setup starts a fake server and a provider of v pointed at it.
func (v vendor) setup(t *testing.T) (*llmapitest.Server, agent.Provider) {
	s := llmapitest.Start(t)
	return s, v.ctor(llmapi.Options{LookupEnv: envOf(v.env(s))})
}

func TestRunStreamsTextAndReportsUsage(t *testing.T) {
	for _, v := range vendors {
		t.Run(v.name, func(t *testing.T) {
			s, p := v.setup(t)
			var texts []string
			var usage agent.Usage
			res, err := p.Run(context.Background(), &agent.Request{NodeID: "n", Prompt: "Say hello", Model: v.model, Role: "verifier",
				System: "Be brief.", Attrs: map[string]string{"max_tokens": "300"}}, func(ev agent.Event) {
				switch ev.Kind {
				case "text":
					texts = append(texts, ev.Text)
				case "usage":
					usage = usage.Add(ev.Usage)
				}
			})
			require.NoError(t, err)
			require.True(t, res.Success)
			require.Equal(t, "Hello world", res.Text)
			require.Equal(t, []string{"Hello", " world"}, texts, "the answer streams piece by piece")
			require.Equal(t, int64(llmapitest.InputTokens), res.Usage.InputTokens)
			require.Equal(t, int64(llmapitest.OutputTokens), res.Usage.OutputTokens)
			want, ok := agent.DefaultPrices().Cost(v.model, llmapitest.InputTokens, llmapitest.CachedTokens, llmapitest.OutputTokens)
			if ok {
				require.Positive(t, res.Usage.Cost)
				require.InDelta(t, want, res.Usage.Cost, 1e-12, "priced from the table, cached input at its price")
			} else {
				require.Zero(t, res.Usage.Cost)
				require.Contains(t, res.Notes, `cost unknown: no price for model "`+v.model+`"`)
			}
			require.Equal(t, res.Usage, usage, "usage events add up to the result's usage")
			if v.wire == "openai-responses" {
				require.Equal(t, "resp_1", res.SessionID, "the stored response continues the thread")
			} else {
				require.Empty(t, res.SessionID, "a stateless API has no session to resume")
			}

			reqs := s.Requests()
			require.Len(t, reqs, 1)
			r := reqs[0]
			require.Equal(t, v.wire, r.Vendor)
			require.Equal(t, "Say hello", r.Prompt)
			require.Contains(t, v.header(r.Header), "sk-test", "the key from the environment")
			body := r.Body
			switch v.wire {
			case "openai-responses":
				require.Equal(t, v.model, body["model"])
				require.Equal(t, true, body["stream"])
				require.Contains(t, body["instructions"], "Be brief.")
				require.Contains(t, body["instructions"], "verifier", "the role's instructions lead the system prompt")
				require.EqualValues(t, 300, body["max_output_tokens"])
			case "openai-chat":
				require.Equal(t, v.model, body["model"])
				require.Equal(t, true, body["stream"])
				require.Equal(t, map[string]any{"include_usage": true}, body["stream_options"])
				msgs := body["messages"].([]any)
				require.Len(t, msgs, 2)
				require.Equal(t, "system", msgs[0].(map[string]any)["role"])
				require.Contains(t, msgs[0].(map[string]any)["content"], "Be brief.")
				require.EqualValues(t, 300, body["max_completion_tokens"])
			case "anthropic":
				require.Equal(t, v.model, body["model"])
				require.Equal(t, true, body["stream"])
				require.EqualValues(t, 300, body["max_tokens"])
				require.Contains(t, body["system"].([]any)[0].(map[string]any)["text"], "Be brief.")
				require.NotEmpty(t, r.Header.Get("Anthropic-Version"))
			case "gemini":
				require.Equal(t, "/v1beta/models/"+v.model+":streamGenerateContent", r.Path)
				cfg := body["generationConfig"].(map[string]any)
				require.EqualValues(t, 300, cfg["maxOutputTokens"])
				require.Contains(t, llmapitestText(body["systemInstruction"]), "Be brief.")
			}
		})
	}
}

func llmapitestText(v any) string {
	m, _ := v.(map[string]any)
	parts, _ := m["parts"].([]any)
	out := ""
	for _, p := range parts {
		out += p.(map[string]any)["text"].(string)
	}
	return out
}

func TestErrorsAreClassified(t *testing.T) {
	cases := []struct {
		prompt     string
		class      agent.Class
		retryAfter time.Duration
	}{
		{"fake:rate_limit", agent.ClassRateLimit, 7 * time.Second},
		{"fake:auth", agent.ClassAuth, 0},
		{"fake:bad_request", agent.ClassBadRequest, 0},
		{"fake:server", agent.ClassServer, 0},
		{"fake:cut", agent.ClassNetwork, 0},
	}
	for _, v := range vendors {
		for _, c := range cases {
			t.Run(v.name+"/"+c.prompt, func(t *testing.T) {
				_, p := v.setup(t)
				res, err := p.Run(context.Background(), &agent.Request{NodeID: "n", Prompt: c.prompt, Model: v.model}, nil)
				require.Nil(t, res)
				var ae *agent.Error
				require.ErrorAs(t, err, &ae)
				require.Equal(t, c.class, ae.Class, "%v", err)
				require.Equal(t, c.class.Retryable(), errors.Is(err, agent.ErrRetryable))
				require.Equal(t, !c.class.Retryable(), errors.Is(err, agent.ErrTerminal))
				require.Equal(t, c.retryAfter, ae.RetryAfter, "the server's Retry-After")
				require.Contains(t, err.Error(), p.Name()+": "+string(c.class)+": ")
			})
		}
		t.Run(v.name+"/fake:stream_error", func(t *testing.T) {
			_, p := v.setup(t)
			_, err := p.Run(context.Background(), &agent.Request{NodeID: "n", Prompt: "fake:stream_error", Model: v.model}, nil)
			var ae *agent.Error
			require.ErrorAs(t, err, &ae)
			require.True(t, ae.Retryable, "an overloaded server mid-stream is retried: %v", err)
			require.Contains(t, []agent.Class{agent.ClassRateLimit, agent.ClassServer}, ae.Class, "%v", err)
		})
	}
}

func TestConnectionRefusedIsANetworkError(t *testing.T) {
	s := llmapitest.Start(t)
	url := s.URL
	s.Close()
	p := llmapi.NewAnthropic(llmapi.Options{LookupEnv: envOf(map[string]string{"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "k"})})
	_, err := p.Run(context.Background(), &agent.Request{Prompt: "hi"}, nil)
	var ae *agent.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, agent.ClassNetwork, ae.Class, "%v", err)
}

func TestBadRequestsAreRefusedBeforeSending(t *testing.T) {
	for _, v := range vendors {
		t.Run(v.name, func(t *testing.T) {
			s, p := v.setup(t)
			for _, req := range []*agent.Request{
				{Prompt: "hi", Role: "no_such_role"},
				{Prompt: "hi", Attrs: map[string]string{"max_tokens": "lots"}},
			} {
				_, err := p.Run(context.Background(), req, nil)
				var ae *agent.Error
				require.ErrorAs(t, err, &ae)
				require.Equal(t, agent.ClassBadRequest, ae.Class, "%v", err)
			}
			require.Empty(t, s.Requests())
		})
	}
}

func TestCheckReportsAMissingKey(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		p    agent.Checker
		want string
	}{
		{llmapi.NewOpenAI(llmapi.Options{LookupEnv: envOf(nil)}), "OPENAI_API_KEY is not set"},
		{llmapi.NewAnthropic(llmapi.Options{LookupEnv: envOf(nil)}), "ANTHROPIC_API_KEY is not set"},
		{llmapi.NewGemini(llmapi.Options{LookupEnv: envOf(nil)}), "GEMINI_API_KEY is not set"},
	} {
		err := c.p.Check(ctx)
		require.ErrorContains(t, err, c.want)
		require.ErrorIs(t, err, agent.ErrTerminal)
	}
	require.NoError(t, llmapi.NewOpenAI(llmapi.Options{LookupEnv: envOf(map[string]string{"OPENAI_BASE_URL": "http://localhost:11434/v1"})}).Check(ctx),
		"a local OpenAI-compatible server needs no key")
	require.NoError(t, llmapi.NewAnthropic(llmapi.Options{LookupEnv: envOf(map[string]string{"ANTHROPIC_AUTH_TOKEN": "t"})}).Check(ctx))
	require.NoError(t, llmapi.NewGemini(llmapi.Options{LookupEnv: envOf(map[string]string{"GOOGLE_API_KEY": "k"})}).Check(ctx))
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		h    http.Header
		want time.Duration
	}{
		{http.Header{}, 0},
		{http.Header{"Retry-After": {"7"}}, 7 * time.Second},
		{http.Header{"Retry-After": {"1.5"}}, 1500 * time.Millisecond},
		{http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"1"}}, 250 * time.Millisecond},
		{http.Header{"Retry-After": {now.Add(90 * time.Second).Format(http.TimeFormat)}}, 90 * time.Second},
		{http.Header{"Retry-After": {now.Add(-time.Hour).Format(http.TimeFormat)}}, 0},
		{http.Header{"Retry-After": {"soon"}}, 0},
		{http.Header{"Retry-After": {"-3"}}, 0},
		{http.Header{"Retry-After": {"86400"}}, 10 * time.Minute},
	} {
		require.Equal(t, c.want, llmapi.RetryAfter(c.h, now), "%v", c.h)
	}
}

func TestConformance(t *testing.T) {
	for _, v := range vendors {
		t.Run(v.name, func(t *testing.T) {
			agenttest.Run(t, func(t *testing.T) agent.Provider { _, p := v.setup(t); return p },
				agenttest.WithPrompt("Say hello", "Hello world"), agenttest.WithHangPrompt("fake:hang"),
				agenttest.WithDeadline(10*time.Second),
				agenttest.WithRequest(func(t *testing.T, req *agent.Request) { req.Model = v.model }))
		})
	}
}

// TestResponsesContinueAThread: a request that resumes a session sends it
// as previous_response_id.
func TestResponsesContinueAThread(t *testing.T) {
	s, p := vendors[0].setup(t)
	_, err := p.Run(context.Background(), &agent.Request{Prompt: "Go on", ResumeSession: "resp_0"}, nil)
	require.NoError(t, err)
	require.Equal(t, "resp_0", s.Requests()[0].Body["previous_response_id"])
}
