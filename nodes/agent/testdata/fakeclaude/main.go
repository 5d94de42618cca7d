// Command fakeclaude speaks Claude Code's print-mode stream-json output for
// the agent tests; the prompt's "fake:SCENARIO" picks what it does.
package main

import (
	"os"
	"strings"

	fa "github.com/switchyard/switchyard/nodes/agent/internal/fakeagent"
)

type m = map[string]any

func main() {
	fa.Child()
	args := os.Args[1:]
	if !fa.Has(args, "-p") {
		fa.Fail(2, "fakeclaude: only print mode (-p) is supported")
	}
	if f, _ := fa.Flag(args, "--output-format"); f != "stream-json" || !fa.Has(args, "--verbose") {
		fa.Fail(2, "Error: When using --print, --output-format=stream-json requires --verbose")
	}
	prompt := fa.ReadStdin()
	fa.Record(prompt)
	model, _ := fa.Flag(args, "--model")
	if model == "" {
		model = "claude-sonnet-4-5"
	}
	session := "c0ffee00-0000-4000-8000-000000000001"
	resumed, isResume := fa.Flag(args, "--resume")
	if isResume {
		session = "c0ffee00-0000-4000-8000-000000000002"
	}
	sc := fa.Scenario(prompt)
	initEv := m{"type": "system", "subtype": "init", "session_id": session, "model": model, "cwd": ".", "tools": []string{"Bash", "Read", "Edit"}, "permissionMode": "default"}

	switch sc {
	case "auth":
		fa.Line(initEv)
		assistantText(session, model, "Invalid API key · Please run /login")
		result(session, true, "success", "Invalid API key · Please run /login", 0, 0, 0)
		os.Exit(1)
	case "rate_limit":
		fa.Line(initEv)
		result(session, true, "success", `API Error: 429 {"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization"}}`, 12, 0, 0.0001)
		os.Exit(1)
	case "overloaded":
		fa.Line(initEv)
		result(session, true, "success", `API Error: 529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, 0, 0, 0)
		os.Exit(1)
	case "bad_request":
		fa.Line(initEv)
		result(session, true, "success", `API Error: 400 {"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 250000 tokens > 200000 maximum"}}`, 0, 0, 0)
		os.Exit(1)
	case "network":
		fa.Fail(1, "Error: connect ECONNRESET 104.18.0.1:443")
	case "crash":
		fa.Fail(3, "fakeclaude: something unexpected happened")
	case "hang":
		fa.Line(initEv)
		fa.Hang(false)
	case "hang_hard":
		fa.Line(initEv)
		fa.Hang(true)
	case "max_turns":
		fa.Line(initEv)
		assistantText(session, model, "Still working on it")
		fa.Line(m{"type": "result", "subtype": "error_max_turns", "is_error": false, "session_id": session, "num_turns": 3,
			"total_cost_usd": 0.5, "usage": m{"input_tokens": 10, "output_tokens": 5}})
		return
	}

	fa.Line(initEv)
	if sc == "malformed" {
		fa.Raw("this is not JSON at all")
		fa.Raw(`{"type":"assistant","message":{"content":[`)
	}
	assistantText(session, model, "Hello")
	fa.Gate()
	fa.Line(m{"type": "assistant", "session_id": session, "message": m{"model": model, "role": "assistant",
		"content": []m{{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": m{"command": "ls"}}}}})
	fa.Line(m{"type": "user", "session_id": session, "message": m{"role": "user",
		"content": []m{{"type": "tool_result", "tool_use_id": "toolu_1", "content": "main.go"}}}})
	final := "world"
	if isResume {
		final = "world (resumed " + resumed + ")"
	}
	if sys, ok := fa.Flag(args, "--append-system-prompt"); ok && strings.Contains(sys, "OUTCOME") {
		final += " OUTCOME:PASS"
	}
	assistantText(session, model, final)
	if sc == "status" {
		fa.WriteStatus("fail", "needs work")
	}
	result(session, false, "success", "Hello\n\n"+final, 100, 50, 0.0123)
}

func assistantText(session, model, text string) {
	fa.Line(m{"type": "assistant", "session_id": session, "message": m{"id": "msg_1", "model": model, "role": "assistant",
		"content": []m{{"type": "text", "text": text}}, "usage": m{"input_tokens": 3, "output_tokens": 2}}})
}

func result(session string, isErr bool, subtype, text string, in, out int, cost float64) {
	fa.Line(m{"type": "result", "subtype": subtype, "is_error": isErr, "duration_ms": 1234, "num_turns": 2,
		"result": text, "session_id": session, "total_cost_usd": cost,
		"usage": m{"input_tokens": in, "cache_creation_input_tokens": 20, "cache_read_input_tokens": 30, "output_tokens": out}})
}
