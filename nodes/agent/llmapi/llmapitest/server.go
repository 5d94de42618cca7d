// Package llmapitest is a local HTTP server that speaks the wire formats of
// the OpenAI (Responses and Chat Completions), Anthropic (Messages) and
// Gemini (generateContent) APIs as the llmapi providers use them: streamed
// answers over server-sent events, usage, and each vendor's error bodies.
// Tests point OPENAI_BASE_URL, ANTHROPIC_BASE_URL and GEMINI_BASE_URL at it.
//
// What a request gets is chosen by its prompt: it answers "Hello world"
// (in two streamed pieces) unless the prompt contains one of
//
//	fake:rate_limit     429 with Retry-After: 7 (Gemini: a RetryInfo of 7s;
//	                    Server.SetRetryAfter changes it)
//	fake:once_rate_limit  429 the first time this prompt is seen, then the answer
//	fake:auth           401
//	fake:bad_request    400
//	fake:server         500
//	fake:stream_error   a good start, then the vendor's in-stream error (overloaded)
//	fake:cut            the stream ends before the vendor's last event
//	fake:hang           the first piece, then nothing until the client goes away
//	fake:answer=TEXT    TEXT (to the end of the line) as the answer
package llmapitest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Usage is what every good answer reports: 100 input tokens (20 of them
// read from a cache) and 50 output tokens.
const (
	InputTokens  = 100
	CachedTokens = 20
	OutputTokens = 50
)

// Request is what the server recorded of one request.
type Request struct {
	Vendor string // openai-responses, openai-chat, anthropic, gemini
	Path   string
	Header http.Header
	Body   map[string]any
	Prompt string // the user prompt found in the body
}

// Server is the fake API server.
type Server struct {
	*httptest.Server
	mu       sync.Mutex
	requests []Request
	seen     map[string]int
	retry    time.Duration
}

// SetRetryAfter sets the delay 429 answers ask for (default 7s).
func (s *Server) SetRetryAfter(d time.Duration) {
	s.mu.Lock()
	s.retry = d
	s.mu.Unlock()
}

// Start starts a server and stops it when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{seen: map[string]int{}, retry: 7 * time.Second}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// OpenAIURL is the base URL for OPENAI_BASE_URL.
func (s *Server) OpenAIURL() string { return s.URL + "/v1" }

// Requests returns what the server received, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body := map[string]any{}
	data, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(data, &body)
	req := Request{Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/responses":
		req.Vendor, req.Prompt = "openai-responses", str(body["input"])
	case r.Method == http.MethodPost && r.URL.Path == "/v1/chat/completions":
		req.Vendor = "openai-chat"
		if msgs, ok := body["messages"].([]any); ok && len(msgs) > 0 {
			req.Prompt = str(msgs[len(msgs)-1].(map[string]any)["content"])
		}
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
		req.Vendor = "anthropic"
		if msgs, ok := body["messages"].([]any); ok && len(msgs) > 0 {
			req.Prompt = contentText(msgs[0].(map[string]any)["content"])
		}
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1beta/models/") && strings.HasSuffix(r.URL.Path, ":streamGenerateContent"):
		req.Vendor = "gemini"
		if cs, ok := body["contents"].([]any); ok && len(cs) > 0 {
			req.Prompt = contentText(cs[0].(map[string]any)["parts"])
		}
	default:
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
		return
	}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.seen[req.Vendor+"\x00"+req.Prompt]++
	first := s.seen[req.Vendor+"\x00"+req.Prompt] == 1
	retry := s.retry
	s.mu.Unlock()

	p := req.Prompt
	switch {
	case strings.Contains(p, "fake:rate_limit"), strings.Contains(p, "fake:once_rate_limit") && first:
		fail(w, req.Vendor, 429, retry)
	case strings.Contains(p, "fake:auth"):
		fail(w, req.Vendor, 401, 0)
	case strings.Contains(p, "fake:bad_request"):
		fail(w, req.Vendor, 400, 0)
	case strings.Contains(p, "fake:server"):
		fail(w, req.Vendor, 500, 0)
	default:
		answer := []string{"Hello", " world"}
		if _, a, ok := strings.Cut(p, "fake:answer="); ok {
			a, _, _ = strings.Cut(a, "\n")
			answer = []string{a}
		}
		mode := ""
		for _, m := range []string{"stream_error", "cut", "hang"} {
			if strings.Contains(p, "fake:"+m) {
				mode = m
			}
		}
		stream(w, r, req, answer, mode)
	}
}

// fail writes the vendor's error body for status.
func fail(w http.ResponseWriter, vendor string, status int, retry time.Duration) {
	w.Header().Set("Content-Type", "application/json")
	var body string
	switch vendor {
	case "anthropic":
		typ := map[int]string{400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit_error", 500: "api_error"}[status]
		body = fmt.Sprintf(`{"type":"error","error":{"type":%q,"message":"fake %d"},"request_id":"req_1"}`, typ, status)
		if status == 429 {
			w.Header().Set("Retry-After", strconv.FormatFloat(retry.Seconds(), 'f', -1, 64))
		}
	case "gemini":
		st := map[int]string{400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL"}[status]
		details := "[]"
		if status == 429 {
			details = `[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"` + strconv.FormatFloat(retry.Seconds(), 'f', -1, 64) + `s"}]`
		}
		body = fmt.Sprintf(`{"error":{"code":%d,"message":"fake %d","status":%q,"details":%s}}`, status, status, st, details)
	default:
		code := map[int]string{400: "invalid_request", 401: "invalid_api_key", 429: "rate_limit_exceeded", 500: "server_error"}[status]
		body = fmt.Sprintf(`{"error":{"message":"fake %d","type":"error","param":null,"code":%q}}`, status, code)
		if status == 429 {
			w.Header().Set("Retry-After-Ms", strconv.FormatInt(retry.Milliseconds(), 10))
			w.Header().Set("Retry-After", strconv.FormatFloat(retry.Seconds(), 'f', -1, 64))
		}
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// stream writes the answer as the vendor's server-sent events.
func stream(w http.ResponseWriter, r *http.Request, req Request, answer []string, mode string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	send := func(event, data string) {
		if event != "" {
			fmt.Fprintf(w, "event: %s\n", event)
		}
		fmt.Fprintf(w, "data: %s\n\n", data)
		if fl != nil {
			fl.Flush()
		}
	}
	model, _ := req.Body["model"].(string)
	if req.Vendor == "gemini" {
		model = strings.TrimSuffix(strings.TrimPrefix(req.Path, "/v1beta/models/"), ":streamGenerateContent")
	}
	hang := func() { <-r.Context().Done() }
	j := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	switch req.Vendor {
	case "openai-responses":
		send("response.created", j(map[string]any{"type": "response.created", "sequence_number": 0,
			"response": map[string]any{"id": "resp_1", "object": "response", "status": "in_progress", "model": model, "output": []any{}}}))
		for i, a := range answer {
			send("response.output_text.delta", j(map[string]any{"type": "response.output_text.delta", "item_id": "msg_1",
				"output_index": 0, "content_index": 0, "delta": a, "sequence_number": i + 1}))
			if mode == "hang" {
				hang()
				return
			}
		}
		switch mode {
		case "stream_error":
			send("error", `{"type":"error","code":"server_error","message":"The server is overloaded","param":null,"sequence_number":9}`)
			return
		case "cut":
			return
		}
		send("response.completed", j(map[string]any{"type": "response.completed", "sequence_number": 10,
			"response": map[string]any{"id": "resp_1", "object": "response", "status": "completed", "model": model,
				"output": []any{map[string]any{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
					"content": []any{map[string]any{"type": "output_text", "text": strings.Join(answer, ""), "annotations": []any{}}}}},
				"usage": map[string]any{"input_tokens": InputTokens, "input_tokens_details": map[string]any{"cached_tokens": CachedTokens},
					"output_tokens": OutputTokens, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": InputTokens + OutputTokens}}}))
	case "openai-chat":
		for i, a := range answer {
			delta := map[string]any{"content": a}
			if i == 0 {
				delta["role"] = "assistant"
			}
			send("", j(map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model,
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": nil}}}))
			if mode == "hang" {
				hang()
				return
			}
		}
		switch mode {
		case "stream_error":
			send("", `{"error":{"message":"The server is overloaded","type":"server_error","code":"server_error"}}`)
			return
		case "cut":
			return
		}
		send("", j(map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": "stop"}}}))
		send("", j(map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model, "choices": []any{},
			"usage": map[string]any{"prompt_tokens": InputTokens, "completion_tokens": OutputTokens, "total_tokens": InputTokens + OutputTokens,
				"prompt_tokens_details": map[string]any{"cached_tokens": CachedTokens}}}))
		send("", "[DONE]")
	case "anthropic":
		// 100 input tokens: 70 fresh, 10 written to the cache, 20 read from it.
		send("message_start", j(map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_1", "type": "message",
			"role": "assistant", "model": model, "content": []any{}, "stop_reason": nil,
			"usage": map[string]any{"input_tokens": InputTokens - CachedTokens - 10, "cache_creation_input_tokens": 10,
				"cache_read_input_tokens": CachedTokens, "output_tokens": 1}}}))
		send("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
		for _, a := range answer {
			send("content_block_delta", j(map[string]any{"type": "content_block_delta", "index": 0,
				"delta": map[string]any{"type": "text_delta", "text": a}}))
			if mode == "hang" {
				hang()
				return
			}
		}
		switch mode {
		case "stream_error":
			send("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
			return
		case "cut":
			return
		}
		send("content_block_stop", `{"type":"content_block_stop","index":0}`)
		send("message_delta", j(map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil},
			"usage": map[string]any{"output_tokens": OutputTokens}}))
		send("message_stop", `{"type":"message_stop"}`)
	case "gemini":
		for i, a := range answer {
			chunk := map[string]any{"candidates": []any{map[string]any{"index": 0,
				"content": map[string]any{"role": "model", "parts": []any{map[string]any{"text": a}}}}},
				"modelVersion": model, "responseId": "gresp_1"}
			if i == len(answer)-1 && mode == "" {
				chunk["candidates"].([]any)[0].(map[string]any)["finishReason"] = "STOP"
				chunk["usageMetadata"] = map[string]any{"promptTokenCount": InputTokens, "cachedContentTokenCount": CachedTokens,
					"candidatesTokenCount": OutputTokens - 10, "thoughtsTokenCount": 10, "totalTokenCount": InputTokens + OutputTokens}
			}
			send("", j(chunk))
			if mode == "hang" {
				hang()
				return
			}
		}
		if mode == "stream_error" {
			send("", `{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}`)
		}
	}
}

func str(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case nil:
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// contentText joins the text of a content list ([{type:text,text:…}] or
// Gemini's [{text:…}]), or returns a plain string.
func contentText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	var b strings.Builder
	if list, ok := v.([]any); ok {
		for _, it := range list {
			if m, ok := it.(map[string]any); ok {
				b.WriteString(str(m["text"]))
			}
		}
	}
	return b.String()
}
