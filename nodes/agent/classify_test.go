package agent_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/nodes/agent"
)

func TestClassifyMessage(t *testing.T) {
	cases := []struct {
		msg  string
		want agent.Class
	}{
		{`API Error: 429 {"type":"error","error":{"type":"rate_limit_error"}}`, agent.ClassRateLimit},
		{"exceeded retry limit, last status: 429 Too Many Requests", agent.ClassRateLimit},
		{`API Error: 529 {"type":"overloaded_error","message":"Overloaded"}`, agent.ClassRateLimit},
		{"Resource has been exhausted (e.g. check quota).", agent.ClassRateLimit},
		{"Claude AI usage limit reached|1760000000", agent.ClassRateLimit},
		{"unexpected status 401 Unauthorized: Missing bearer", agent.ClassAuth},
		{"HTTP/1.1 403 Forbidden", agent.ClassAuth},
		{"Invalid API key · Please run /login", agent.ClassAuth},
		{"When using Gemini API, you must specify the GEMINI_API_KEY environment variable.", agent.ClassAuth},
		{"OAuth token has expired. Please obtain a new token", agent.ClassAuth},
		{`API Error: 400 {"type":"invalid_request_error","message":"prompt is too long"}`, agent.ClassBadRequest},
		{"The model `gpt-9` does not exist or you do not have access to it. model not found", agent.ClassBadRequest},
		{"status: 404 Not Found", agent.ClassBadRequest},
		{"unexpected status 503 Service Unavailable", agent.ClassServer},
		{"API Error: 500 Internal server error", agent.ClassServer},
		{"502 Bad Gateway", agent.ClassServer},
		{"Error: connect ECONNRESET 104.18.0.1:443", agent.ClassNetwork},
		{"stream disconnected before completion", agent.ClassNetwork},
		{"request timed out", agent.ClassNetwork},
		{"getaddrinfo EAI_AGAIN api.anthropic.com", agent.ClassNetwork},
		{"tests failed on line 500", agent.ClassUnknown},
		{"panic: something odd", agent.ClassUnknown},
		{"", agent.ClassUnknown},
	}
	for _, tc := range cases {
		t.Run(tc.msg, func(t *testing.T) {
			require.Equal(t, tc.want, agent.ClassifyMessage(tc.msg))
		})
	}
}

func TestClassError(t *testing.T) {
	cases := []struct {
		name      string
		msgs      []string
		class     agent.Class
		retryable bool
		text      string
	}{
		{name: "the CLI's words first, class from any", msgs: []string{"request failed", "HTTP 429"}, class: agent.ClassRateLimit, retryable: true, text: "codex: rate_limit: request failed"},
		{name: "first class wins", msgs: []string{"401 Unauthorized", "429 Too Many Requests"}, class: agent.ClassAuth, text: "codex: auth: 401 Unauthorized"},
		{name: "nothing said", msgs: []string{"", "  "}, class: agent.ClassUnknown, text: "codex: unknown: the agent failed without a message"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := agent.ClassError("codex", tc.msgs...)
			require.Equal(t, tc.class, err.Class)
			require.Equal(t, tc.retryable, errors.Is(err, agent.ErrRetryable))
			require.Equal(t, !tc.retryable, errors.Is(err, agent.ErrTerminal))
			require.Equal(t, tc.text, err.Error())
		})
	}
}
