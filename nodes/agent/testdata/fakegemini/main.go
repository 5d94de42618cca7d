// Command fakegemini speaks the Gemini CLI's headless JSON output (stream-json
// and json) for the agent tests; the prompt's "fake:SCENARIO" picks what it
// does.
package main

import (
	"encoding/json"
	"os"
	"strings"

	fa "github.com/switchyard/switchyard/nodes/agent/internal/fakeagent"
)

type m = map[string]any

func main() {
	fa.Child()
	args := os.Args[1:]
	prompt, ok := fa.Flag(args, "--prompt")
	if !ok {
		fa.Fail(42, "fakegemini: want --prompt")
	}
	stdin := ""
	if strings.HasPrefix(prompt, "Follow the instructions given on standard input") {
		stdin = fa.ReadStdin()
		prompt = stdin + "\n" + prompt
	}
	fa.Record(stdin)
	format, _ := fa.Flag(args, "--output-format")
	model, _ := fa.Flag(args, "--model")
	if model == "" {
		model = "gemini-2.5-pro"
	}
	session := "8e7e1d4a-5b0c-4d4e-9f3a-000000000001"
	resumed, isResume := fa.Flag(args, "--resume")
	if isResume {
		session = resumed
	}
	sc := fa.Scenario(prompt)
	final := "world"
	if isResume {
		final = "world (resumed " + resumed + ")"
	}

	if format == "json" {
		out := m{"session_id": session, "response": "Hello " + final, "stats": m{"models": m{model: m{
			"api":    m{"totalRequests": 1, "totalErrors": 0, "totalLatencyMs": 900},
			"tokens": m{"prompt": 500, "candidates": 60, "total": 580, "cached": 100, "thoughts": 20, "tool": 0}}}}}
		if sc == "auth" {
			out = m{"error": m{"type": "FatalAuthenticationError", "message": "When using Gemini API, you must specify the GEMINI_API_KEY environment variable.", "code": 41}}
		}
		b, _ := json.MarshalIndent(out, "", "  ")
		os.Stdout.Write(append(b, '\n'))
		if sc == "auth" {
			os.Exit(41)
		}
		return
	}
	if format != "stream-json" {
		fa.Fail(42, "fakegemini: unknown output format "+format)
	}
	fa.Line(m{"type": "init", "timestamp": "2026-01-01T00:00:00.000Z", "session_id": session, "model": model})
	fa.Line(m{"type": "message", "timestamp": "2026-01-01T00:00:00.100Z", "role": "user", "content": prompt})
	switch sc {
	case "rate_limit":
		fa.Line(m{"type": "error", "timestamp": "2026-01-01T00:00:01.000Z", "severity": "warning", "message": "Retrying after a rate limit"})
		fa.Line(m{"type": "result", "timestamp": "2026-01-01T00:00:02.000Z", "status": "error",
			"error": m{"type": "ApiError", "message": "[API Error: got status: 429 Too Many Requests. Resource has been exhausted (e.g. check quota).]"},
			"stats": m{"total_tokens": 0, "input_tokens": 0, "output_tokens": 0, "duration_ms": 2000, "tool_calls": 0}})
		os.Exit(1)
	case "auth":
		fa.Fail(41, "When using Gemini API, you must specify the GEMINI_API_KEY environment variable.")
	case "hang":
		fa.Hang(false)
	}
	if sc == "malformed" {
		fa.Raw("Loaded cached credentials.")
		fa.Raw(`{"type":"message","role":`)
	}
	fa.Line(m{"type": "message", "timestamp": "2026-01-01T00:00:00.200Z", "role": "assistant", "content": "Hello ", "delta": true})
	fa.Gate()
	fa.Line(m{"type": "tool_use", "timestamp": "2026-01-01T00:00:00.300Z", "tool_name": "run_shell_command", "tool_id": "t1", "parameters": m{"command": "ls"}})
	fa.Line(m{"type": "tool_result", "timestamp": "2026-01-01T00:00:00.400Z", "tool_id": "t1", "status": "success", "output": "main.go"})
	fa.Line(m{"type": "message", "timestamp": "2026-01-01T00:00:00.500Z", "role": "assistant", "content": final, "delta": true})
	if sc == "status" {
		fa.WriteStatus("partial_success", "")
	}
	fa.Line(m{"type": "result", "timestamp": "2026-01-01T00:00:01.000Z", "status": "success",
		"stats": m{"total_tokens": 580, "input_tokens": 500, "output_tokens": 80, "cached": 100, "input": 400, "duration_ms": 1000, "tool_calls": 1}})
}
