package nodes

import (
	"fmt"
	"sort"
	"strings"

	"github.com/switchyard/switchyard/edges"
	"github.com/switchyard/switchyard/graph"
)

// The fidelity modes (spec 5.4): how much of the run's prior context an
// agent's prompt carries.
const (
	FidelityFull     = "full"     // the CLI's own conversation goes on (resumed session)
	FidelityTruncate = "truncate" // the goal and the node's prompt
	FidelityCompact  = "compact"  // the goal and every context key, briefly (the default)
)

// summaryLevel is how much of the context a summary:LEVEL prompt carries:
// the keys most recent first, and the length a value is cut to.
type summaryLevel struct {
	keys  int // 0: all
	chars int
}

var summaryLevels = map[string]summaryLevel{
	"summary:low":    {keys: 3, chars: 100},
	"summary:medium": {keys: 10, chars: 300},
	"summary:high":   {keys: 0, chars: 1000},
}

// recentKeys are the context keys about the last step, which lead a summary.
var recentKeys = []string{"last_stage", "last_response", "outcome", "preferred_label"}

// incomingEdges are the edges whose envelopes fired the node, in message
// order.
func incomingEdges(in *Input) []*graph.Edge {
	if in.Graph == nil || in.Node == nil {
		return nil
	}
	var out []*graph.Edge
	for _, m := range in.Messages {
		if m.Edge == "" {
			continue
		}
		for _, e := range in.Graph.Incoming(in.Node.ID) {
			if edges.EdgeID(e) == m.Edge {
				out = append(out, e)
				break
			}
		}
	}
	return out
}

// resolveFidelity is the fidelity of this run (spec 5.4): the fidelity of
// the edge it came over, else the node's, else the graph's
// default_fidelity, else compact.
func resolveFidelity(in *Input) string {
	for _, e := range incomingEdges(in) {
		if f := e.Fidelity(); f != "" {
			return f
		}
	}
	return in.Node.Fidelity(in.Graph)
}

// threadName is the thread the node's runs belong to, under which a run
// records the CLI session it ran in: the node's thread_id, else the
// thread_id of the edge it came over, else its first class; "" when none
// is set (the run records under its own node id).
func threadName(in *Input) string {
	if t := in.Node.ThreadID(); t != "" {
		return t
	}
	for _, e := range incomingEdges(in) {
		if t := e.ThreadID(); t != "" {
			return t
		}
	}
	if len(in.Node.Classes) > 0 {
		return in.Node.Classes[0]
	}
	return ""
}

// recordThreads are the threads a run's CLI session is recorded under: the
// node's id (a later full-fidelity node without a thread continues the
// node before it) and its thread, if any.
func recordThreads(in *Input) []string {
	if t := threadName(in); t != "" && t != in.Node.ID {
		return []string{in.Node.ID, t}
	}
	return []string{in.Node.ID}
}

// resumeThread is the thread a full-fidelity run continues: its thread,
// else the previous node's (the node whose output fired it).
func resumeThread(in *Input) string {
	if t := threadName(in); t != "" {
		return t
	}
	for _, m := range in.Messages {
		if m.From != "" && m.From != in.Node.ID {
			return m.From
		}
	}
	if prev := in.Context["last_stage"]; prev != "" {
		return prev
	}
	return in.Node.ID
}

// threadKey is the context key of a thread's CLI session id; the provider
// that made the session is under threadKey(t)+".provider".
func threadKey(thread string) string { return ThreadKeyPrefix + thread }

// threadStale reports whether the thread's session is from before a
// resume: its CLI session may be gone with the process (or machine) that
// held it, so the run starts afresh at summary:high (spec 5.4).
func threadStale(in *Input, thread string) bool {
	return in.Context[threadKey(thread)+ThreadStaleSuffix] == "1" && in.Context[threadKey(thread)] != ""
}

// threadSession is the CLI session a full-fidelity run of provider
// resumes, "" when the thread has none from that provider.
func threadSession(in *Input, thread, provider string) string {
	id := in.Context[threadKey(thread)]
	if id == "" {
		return ""
	}
	if p := in.Context[threadKey(thread)+ThreadProviderSuffix]; p != "" && p != provider {
		return ""
	}
	return id
}

// buildPrompt is the prompt the agent gets under the fidelity: the node's
// prompt, led by the goal and as much of the run context as the fidelity
// asks for (resumed: none, the CLI has the history). Inputs from outside
// (a message, a human answer) that fired the node are in every mode.
func buildPrompt(in *Input, prompt, fidelity string, resumed bool) string {
	var b strings.Builder
	if !resumed {
		goal := in.Context["graph.goal"]
		if goal == "" && in.Graph != nil {
			goal = in.Graph.Goal()
		}
		if goal != "" {
			fmt.Fprintf(&b, "Goal: %s\n\n", goal)
		}
		switch lv, isSummary := summaryLevels[fidelity]; {
		case isSummary:
			writeSummary(&b, in.Context, lv)
		case fidelity == FidelityTruncate:
		default: // compact, and full when there is no session to resume yet
			writeCompact(&b, in.Context)
		}
	}
	for _, m := range in.Messages {
		if strings.Contains(prompt, "$input") {
			break // the prompt places the input itself
		}
		if m.Text != "" && (m.From == "" || m.Kind != "handoff") {
			fmt.Fprintf(&b, "Input (%s): %s\n\n", m.Kind, m.Text)
		}
	}
	b.WriteString(ExpandInput(prompt, in.Messages))
	return b.String()
}

// contextKeys are the keys of the context a prompt may show (not the
// engine's own).
func contextKeys(ctx map[string]string) []string {
	var keys []string
	for k := range ctx {
		if strings.HasPrefix(k, "graph.") || strings.HasPrefix(k, "internal.") || k == "current_node" {
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// writeCompact writes every context key with its value cut to 200 bytes.
func writeCompact(b *strings.Builder, ctx map[string]string) {
	keys := contextKeys(ctx)
	if len(keys) == 0 {
		return
	}
	b.WriteString("Context from earlier steps:\n")
	for _, k := range keys {
		fmt.Fprintf(b, "- %s: %s\n", k, truncate(ctx[k], 200))
	}
	b.WriteString("\n")
}

// writeSummary writes the level's number of context keys, those about the
// last step first, with values cut to the level's length.
func writeSummary(b *strings.Builder, ctx map[string]string, lv summaryLevel) {
	keys := contextKeys(ctx)
	if len(keys) == 0 {
		return
	}
	ordered := make([]string, 0, len(keys))
	for _, k := range recentKeys {
		if _, ok := ctx[k]; ok {
			ordered = append(ordered, k)
		}
	}
	for _, k := range keys {
		if !containsKey(recentKeys, k) {
			ordered = append(ordered, k)
		}
	}
	if lv.keys > 0 && len(ordered) > lv.keys {
		ordered = ordered[:lv.keys]
	}
	if len(ordered) < len(keys) {
		fmt.Fprintf(b, "Summary of earlier steps (%d of %d context keys):\n", len(ordered), len(keys))
	} else {
		b.WriteString("Summary of earlier steps:\n")
	}
	for _, k := range ordered {
		v := ctx[k]
		if len(v) > lv.chars {
			v = truncate(v, lv.chars) + "…"
		}
		fmt.Fprintf(b, "- %s: %s\n", k, v)
	}
	b.WriteString("\n")
}

func containsKey(list []string, k string) bool {
	for _, s := range list {
		if s == k {
			return true
		}
	}
	return false
}
