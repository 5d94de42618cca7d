// Command fakecodex speaks `codex exec --json` JSONL events for the agent
// tests; the prompt's "fake:SCENARIO" picks what it does.
package main

import (
	"os"

	fa "github.com/switchyard/switchyard/nodes/agent/internal/fakeagent"
)

type m = map[string]any

func main() {
	fa.Child()
	args := os.Args[1:]
	if len(args) == 0 || args[0] != "exec" || !fa.Has(args, "--json") {
		fa.Fail(2, "fakecodex: want `exec --json`")
	}
	if args[len(args)-1] != "-" {
		fa.Fail(2, "fakecodex: want the prompt on stdin (-)")
	}
	prompt := fa.ReadStdin()
	fa.Record(prompt)
	thread := "0199a213-81c0-7800-8aa1-bbab2a035a53"
	resumeID := ""
	for i, a := range args {
		if a == "resume" && i+1 < len(args) {
			resumeID = args[i+1]
			thread = resumeID
		}
	}
	sc := fa.Scenario(prompt)
	fa.Line(m{"type": "thread.started", "thread_id": thread})
	fa.Line(m{"type": "turn.started"})
	switch sc {
	case "rate_limit":
		msg := "exceeded retry limit, last status: 429 Too Many Requests"
		fa.Line(m{"type": "error", "message": msg})
		fa.Line(m{"type": "turn.failed", "error": m{"message": msg}})
		os.Exit(1)
	case "auth":
		msg := "unexpected status 401 Unauthorized: Missing bearer or basic authentication in header"
		fa.Line(m{"type": "error", "message": msg})
		fa.Line(m{"type": "turn.failed", "error": m{"message": msg}})
		os.Exit(1)
	case "server":
		msg := "unexpected status 503 Service Unavailable: upstream connect error"
		fa.Line(m{"type": "turn.failed", "error": m{"message": msg}})
		os.Exit(1)
	case "hang":
		fa.Hang(false)
	case "crash":
		fa.Fail(101, "thread 'main' panicked at exec/src/lib.rs:1:1")
	}
	if sc == "malformed" {
		fa.Raw("{not json")
		fa.Raw(`"a bare string"`)
	}
	if sc == "transient" {
		fa.Line(m{"type": "error", "message": "stream disconnected before completion: error sending request; retrying 1/5"})
	}
	fa.Line(m{"type": "item.completed", "item": m{"id": "item_0", "type": "reasoning", "text": "**Looking around**"}})
	fa.Line(m{"type": "item.started", "item": m{"id": "item_1", "type": "command_execution", "command": "bash -lc ls", "aggregated_output": "", "exit_code": nil, "status": "in_progress"}})
	fa.Line(m{"type": "item.completed", "item": m{"id": "item_1", "type": "command_execution", "command": "bash -lc ls", "aggregated_output": "main.go\n", "exit_code": 0, "status": "completed"}})
	fa.Line(m{"type": "item.completed", "item": m{"id": "item_2", "type": "agent_message", "text": "Hello"}})
	fa.Gate()
	fa.Line(m{"type": "item.completed", "item": m{"id": "item_3", "type": "file_change", "changes": []m{{"path": "a.go", "kind": "update"}}, "status": "completed"}})
	final := "world"
	if resumeID != "" {
		final = "world (resumed " + resumeID + ")"
	}
	fa.Line(m{"type": "item.completed", "item": m{"id": "item_4", "type": "agent_message", "text": final}})
	if sc == "status" {
		fa.WriteStatus("success", "done")
	}
	fa.Line(m{"type": "turn.completed", "usage": m{"input_tokens": 1000, "cached_input_tokens": 200, "output_tokens": 300}})
}
