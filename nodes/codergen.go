package nodes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/switchyard/switchyard/nodes/agent"
)

// agentRunner runs a node's agent: it builds the request, writes prompt.md
// and response.md, and reads status.json.
type agentRunner struct{ deps Deps }

// Codergen runs a coding agent on the node's prompt (spec 4.5).
type Codergen struct{ agents *agentRunner }

var _ Handler = (*Codergen)(nil)

// Handle runs the agent. status.json written by the agent in the stage
// directory sets the outcome; else the agent's explicit status; else its
// success.
//
// In a mode (attribute mode), the node keeps one agent thread over its
// firings: auto continues on ticks until the agent says DONE (or writes
// status.json), interactive answers each message until /done or DONE.
func (h *Codergen) Handle(ctx context.Context, in *Input) (*Outcome, error) {
	t := planTurn(ctx, in)
	if t != nil && t.end {
		return endConversation(in), nil
	}
	res, o, err := h.agents.run(ctx, in, t)
	if err != nil || o != nil {
		return o, err
	}
	wroteStatus := false
	if t != nil {
		_, wroteStatus, _ = ReadStatusFile(in.StageDir) // before finish writes its own
	}
	if o, err = h.agents.finish(in, res, resultOutcome(res)); err != nil || t == nil {
		return o, err
	}
	t.finish(in, res, o, wroteStatus)
	return o, nil
}

// resultOutcome is the outcome an agent's result implies, when it wrote no
// status.json.
func resultOutcome(res *agent.Result) *Outcome {
	o := &Outcome{Status: StatusSuccess, PreferredLabel: res.PreferredLabel,
		SuggestedNextIDs: res.SuggestedNextIDs, ContextUpdates: res.ContextUpdates, Notes: res.Notes}
	switch {
	case res.Status != "":
		o.Status = ParseStatus(res.Status)
	case !res.Success:
		o.Status = StatusFail
	}
	if o.Status == StatusFail {
		o.FailureReason = "the agent reported failure"
		if res.Notes != "" {
			o.FailureReason += ": " + res.Notes
		}
	}
	return o
}

// run builds the request and calls the provider. A provider error becomes
// a failed outcome (retryable when the error says so).
func (r *agentRunner) run(ctx context.Context, in *Input, t *turn) (*agent.Result, *Outcome, error) {
	prompt := in.Prompt
	if prompt == "" {
		prompt = in.Node.Label()
	}
	name := r.providerName(in)
	if r.deps.Providers == nil {
		return nil, &Outcome{Status: StatusFail, FailureReason: "no agent providers configured"}, nil
	}
	p, err := r.deps.Providers(name)
	if err != nil {
		return nil, &Outcome{Status: StatusFail, FailureReason: err.Error()}, nil
	}
	// Fidelity full continues the thread's CLI session when there is one
	// (its id is in the context, so it survives checkpoints and processes).
	fidelity := resolveFidelity(in)
	var thread, resume string
	switch {
	case t != nil: // a mode: the node's own thread, whatever the fidelity
		thread = t.thread
	case fidelity == FidelityFull:
		thread = resumeThread(in)
	}
	if thread != "" {
		if threadStale(in, thread) {
			// The first run on a thread after a resume: afresh, with a
			// summary of the context instead of the lost conversation.
			fidelity = "summary:high"
		} else {
			resume = threadSession(in, thread, name)
		}
	}
	full := buildPrompt(in, prompt, fidelity, resume != "")
	switch {
	case t != nil && t.prompt != "" && resume != "":
		full = t.prompt // a continuation: the thread has the rest
	case t != nil && t.prompt != "" && threadStale(in, thread):
		full += "\n\n" + t.prompt // a continuation the agent has to catch up on
	}
	if err := writeStage(in.StageDir, "prompt.md", full); err != nil {
		return nil, nil, fmt.Errorf("write prompt.md: %w", err)
	}
	// A status.json from an earlier attempt must not decide this one.
	if in.StageDir != "" {
		_ = os.Remove(filepath.Join(in.StageDir, "status.json"))
	}
	attrs := map[string]string{}
	for _, k := range in.Node.Attrs.Keys() {
		attrs[k] = in.Node.Attrs.String(k)
	}
	if attrs["workflow_mode"] == "" && in.Graph != nil && in.Graph.WorkflowMode() != "" {
		// The graph's mode applies to every agent (planning: its permissions).
		attrs["workflow_mode"] = in.Graph.WorkflowMode()
	}
	req := &agent.Request{
		SessionID: in.SessionID, NodeID: in.Node.ID, Prompt: full,
		Provider: name, Model: in.Node.LLMModel(),
		ReasoningEffort: in.Node.Attrs.String("reasoning_effort"),
		WorkDir:         in.WorkDir, StageDir: in.StageDir,
		ThreadID: threadName(in), ResumeSession: resume, Fidelity: fidelity,
		Role: in.Node.Role(), AttemptID: in.AttemptID, Attrs: attrs,
	}
	// workflow_mode="planning": the work tree is compared before and after
	// the run; changes outside docs/ fail the node and are reverted.
	guard, guardNote := startPlanningGuard(ctx, in)
	text := textEvents{emit: in.Emit}
	res, err := p.Run(ctx, req, func(ev agent.Event) {
		switch {
		case ev.Kind == "text":
			text.add(ev.Text)
		case ev.Kind == "tool_call" && in.Emit != nil:
			text.flush()
			in.Emit("agent.tool_call", map[string]any{"tool": ev.Tool})
		case ev.Kind == "usage" && in.OnUsage != nil:
			in.OnUsage(ev.Usage)
		}
	})
	text.flush()
	if guard != nil {
		if v := guard.finish(ctx, r.deps.Clock); v != nil {
			o := &Outcome{Status: StatusFail, FailureReason: v.reason()}
			if err != nil {
				o.FailureReason += "; the agent also failed: " + err.Error()
			}
			if res != nil {
				o.Usage = res.Usage
			}
			if in.Emit != nil {
				in.Emit("agent.planning_violation", map[string]any{"paths": strings.Join(v.changed, ", ")})
			}
			_ = WriteStatusFile(in.StageDir, o)
			return nil, o, nil
		}
	}
	if err != nil {
		o := &Outcome{Status: StatusFail, FailureReason: err.Error(), Retryable: errors.Is(err, agent.ErrRetryable)}
		var ae *agent.Error
		if errors.As(err, &ae) {
			o.RetryAfter = ae.RetryAfter
		}
		if res != nil {
			o.Usage = res.Usage
		}
		_ = WriteStatusFile(in.StageDir, o)
		return nil, o, nil
	}
	if guardNote != "" {
		res.Notes = agent.JoinNotes(res.Notes, guardNote)
	}
	if err := writeStage(in.StageDir, "response.md", res.Text); err != nil {
		return nil, nil, fmt.Errorf("write response.md: %w", err)
	}
	return res, nil, nil
}

// providerName is the provider the node's agent runs with: llm_provider,
// else the one its model implies, else the default, else mock.
func (r *agentRunner) providerName(in *Input) string {
	if r.deps.OverrideProviders {
		if r.deps.DefaultProvider != "" {
			return r.deps.DefaultProvider
		}
		return "mock"
	}
	name := in.Node.LLMProvider()
	if name == "" {
		name = agent.InferProvider(in.Node.LLMModel())
	}
	if name == "" {
		name = r.deps.DefaultProvider
	}
	if name == "" {
		name = "mock"
	}
	return name
}

// finish applies status.json (if the agent wrote one), records the
// response and writes the final status.json.
func (r *agentRunner) finish(in *Input, res *agent.Result, o *Outcome) (*Outcome, error) {
	if sf, ok, err := ReadStatusFile(in.StageDir); err != nil {
		o = &Outcome{Status: StatusFail, FailureReason: err.Error()}
	} else if ok {
		o = sf.outcome()
	} else if in.Node.AutoStatus() && res.Status == "" {
		// auto_status (appendix C): no status written means success.
		o = &Outcome{Status: StatusSuccess, PreferredLabel: o.PreferredLabel, SuggestedNextIDs: o.SuggestedNextIDs,
			ContextUpdates: o.ContextUpdates, Notes: o.Notes}
	}
	o.Response = res.Text
	o.Usage = res.Usage
	if o.ContextUpdates == nil {
		o.ContextUpdates = map[string]string{}
	}
	o.ContextUpdates["last_stage"] = in.Node.ID
	o.ContextUpdates["last_response"] = truncate(res.Text, 200)
	if res.SessionID != "" {
		// The thread's session, for the next full-fidelity run on it.
		for _, t := range recordThreads(in) {
			o.ContextUpdates[threadKey(t)] = res.SessionID
			o.ContextUpdates[threadKey(t)+ThreadProviderSuffix] = r.providerName(in)
			if in.Context[threadKey(t)+ThreadStaleSuffix] != "" {
				o.ContextUpdates[threadKey(t)+ThreadStaleSuffix] = "" // a live session again
			}
		}
	}
	if err := WriteStatusFile(in.StageDir, o); err != nil {
		return nil, fmt.Errorf("write status.json: %w", err)
	}
	return o, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
