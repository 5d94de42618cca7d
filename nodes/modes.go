package nodes

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/switchyard/switchyard/nodes/agent"
)

// Agent modes (node attribute mode).
const (
	// ModeInteractive holds a conversation: after each reply the node
	// waits for the next message (switchyard chat, its inbox) and answers
	// on the same agent thread, until the person sends /done or the agent
	// says DONE.
	ModeInteractive = "interactive"
	// ModeAuto keeps working: after a run that did not end with DONE (or
	// a status.json), the node fires again with a tick carrying what
	// changed, on the same thread, until done or the scheduler stops it.
	ModeAuto = "auto"
)

// DoneCommand ends an interactive conversation.
const DoneCommand = "/done"

// turn is what a mode makes of one firing of an agent node.
type turn struct {
	mode    string
	thread  string // the node's agent thread
	prompt  string // the prompt of a continuation on the thread
	replyTo string // interactive: the id of the message answered
	end     bool   // interactive: the person ended the conversation
}

// planTurn decides the thread and the continuation prompt of a firing in
// mode (nil when the node has no mode: one plain run). The first turn,
// with no thread yet, is the node's own prompt.
func planTurn(ctx context.Context, in *Input) *turn {
	mode := in.Node.Mode()
	if mode != ModeInteractive && mode != ModeAuto {
		return nil
	}
	t := &turn{mode: mode, thread: threadName(in)}
	if t.thread == "" {
		t.thread = in.Node.ID
	}
	switch mode {
	case ModeInteractive:
		var parts []string
		for _, m := range in.Messages {
			text := strings.TrimSpace(m.Text)
			if m.From == "" {
				t.replyTo = m.ID
				if text == DoneCommand {
					t.end = true
				} else if text != "" {
					parts = append(parts, text)
				}
				continue
			}
			parts = append(parts, fmt.Sprintf("From %s (%s): %s", m.From, m.Status, firstNonEmpty(m.Response, m.Text)))
		}
		t.prompt = strings.Join(parts, "\n\n")
	case ModeAuto:
		t.prompt = tickPrompt(ctx, in)
	}
	return t
}

// tickPrompt tells an agent in auto mode what changed since its last turn:
// the envelopes that arrived (upstream results with their status, outside
// input) and the files changed in the work tree.
func tickPrompt(ctx context.Context, in *Input) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Continue the task (turn %d).\n", turnOf(in)+1)
	var news []string
	for _, m := range in.Messages {
		switch {
		case m.Kind == "tick" && m.From == in.Node.ID:
			continue
		case m.From == "":
			news = append(news, fmt.Sprintf("- input (%s): %s", m.Kind, m.Text))
		default:
			news = append(news, fmt.Sprintf("- %s finished with %s: %s", m.From, m.Status, truncate(firstNonEmpty(m.Response, m.Text), 2000)))
		}
	}
	if len(news) > 0 {
		b.WriteString("\nWhat arrived since your last turn:\n")
		b.WriteString(strings.Join(news, "\n"))
		b.WriteString("\n")
	} else {
		b.WriteString("\nNothing arrived since your last turn.\n")
	}
	if st := workTreeStatus(ctx, in.WorkDir); st != "" {
		b.WriteString("\nFiles changed in the work tree (git status):\n")
		b.WriteString(st)
		b.WriteString("\n")
	}
	b.WriteString("\nWhen the task is complete, say DONE on a line of its own (or write status.json).")
	return b.String()
}

// workTreeStatus is `git status --short` of dir, at most 50 lines ("" when
// dir is not a git work tree).
func workTreeStatus(ctx context.Context, dir string) string {
	if dir == "" {
		return ""
	}
	cmd := exec.CommandContext(ctx, "git", "-C", dir, "status", "--short")
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > 50 {
		lines = append(lines[:50], fmt.Sprintf("... and %d more", len(lines)-50))
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

// SaysDone reports whether an agent's reply ends its task: a line that is
// DONE (optionally followed by "." or ":" and a note).
func SaysDone(text string) bool {
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "DONE" || strings.HasPrefix(line, "DONE:") || strings.HasPrefix(line, "DONE.") {
			return true
		}
	}
	return false
}

// finish applies the mode to the outcome of a turn: an interactive reply
// is sent back (agent.reply), and a node that is not done (no DONE, no
// status.json of the agent's, no explicit status) continues. The
// thread's session id is recorded by the agent runner, as for any run.
func (t *turn) finish(in *Input, res *agent.Result, o *Outcome, wroteStatus bool) {
	if o.ContextUpdates == nil {
		o.ContextUpdates = map[string]string{}
	}
	o.ContextUpdates[turnKey(in)] = strconv.Itoa(turnOf(in) + 1)
	if o.Status == StatusFail || res == nil {
		return
	}
	done := wroteStatus || res.Status != "" || SaysDone(res.Text)
	switch t.mode {
	case ModeInteractive:
		if in.Emit != nil {
			in.Emit("agent.reply", map[string]any{"message": res.Text, "in_reply_to": t.replyTo})
		}
		if !done {
			o.Continue = ContinueWait
		}
	case ModeAuto:
		if !done {
			o.Continue = ContinueTick
		}
	}
}

// endConversation completes an interactive node the person ended: its last
// reply goes downstream.
func endConversation(in *Input) *Outcome {
	return &Outcome{Status: StatusSuccess, Response: lastResponse(in), Notes: "conversation ended with " + DoneCommand}
}

// lastResponse is the node's last reply (its response.md), for a
// conversation the person ends.
func lastResponse(in *Input) string {
	if in.StageDir == "" {
		return ""
	}
	data, err := os.ReadFile(filepath.Join(in.StageDir, "response.md"))
	if err != nil {
		return ""
	}
	return string(data)
}

func turnKey(in *Input) string { return "internal.turn." + in.Node.ID }

// turnOf is how many turns the node took before this one.
func turnOf(in *Input) int {
	n, _ := strconv.Atoi(in.Context[turnKey(in)])
	return n
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
