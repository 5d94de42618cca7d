package nodes

import (
	"context"
	"encoding/json"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// FanIn is the parallel.fan_in handler. The runtime fires it once with one
// message per branch of the fork; it merges what every branch learned under
// parallel.<branch>.<key>, writes parallel.results (each branch's status
// and response) and chooses the best branch: by status rank (success,
// partial_success, retry, fail), then branch id; or, when the node has a
// prompt, the branch its agent names with a BEST:<branch> line. It
// succeeds when every branch succeeded, is partial_success when some failed
// and fails when all did.
type FanIn struct{ agents *agentRunner }

var _ Handler = (*FanIn)(nil)

// branchResult is one entry of parallel.results.
type branchResult struct {
	Branch   string `json:"branch"`
	Status   string `json:"status"`
	Response string `json:"response,omitempty"`
}

func rank(s Status) int {
	switch s {
	case StatusSuccess:
		return 0
	case StatusPartial:
		return 1
	case StatusRetry:
		return 2
	case StatusFail:
		return 3
	}
	if s.IsSuccess() {
		return 0
	}
	return 4
}

// Handle merges the branches.
func (h *FanIn) Handle(ctx context.Context, in *Input) (*Outcome, error) {
	if len(in.Messages) == 0 {
		return &Outcome{Status: StatusFail, FailureReason: "fan-in received no branch results"}, nil
	}
	updates := map[string]string{}
	results := make([]branchResult, 0, len(in.Messages))
	failed := 0
	for i, m := range in.Messages {
		b := m.Branch
		if b == "" {
			b = m.From
		}
		if b == "" {
			b = "input" + strconv.Itoa(i)
		}
		for k, v := range m.Updates {
			if len(k) > 9 && k[:9] == "internal." {
				continue
			}
			updates["parallel."+b+"."+k] = v
		}
		st := m.Status
		if st == "" {
			st = StatusSuccess
		}
		if !st.IsSuccess() {
			failed++
		}
		results = append(results, branchResult{Branch: b, Status: string(st), Response: truncate(m.Response, 500)})
	}
	sort.SliceStable(results, func(i, j int) bool {
		ri, rj := rank(Status(results[i].Status)), rank(Status(results[j].Status))
		if ri != rj {
			return ri < rj
		}
		return results[i].Branch < results[j].Branch
	})
	data, _ := json.Marshal(results)
	updates["parallel.results"] = string(data)
	best := results[0]
	var notes []string
	var usage Usage
	if strings.TrimSpace(in.Node.Prompt()) != "" && h.agents != nil {
		pick, u, note := h.rank(ctx, in, results, string(data))
		usage = u
		if note != "" {
			notes = append(notes, note)
		}
		found := pick == ""
		for _, r := range results {
			if r.Branch == pick {
				best, found = r, true
				updates["parallel.fan_in.ranked_by"] = "agent"
			}
		}
		if !found {
			notes = append(notes, "the ranking agent named an unknown branch "+strconv.Quote(pick))
		}
	}
	updates["parallel.fan_in.best_id"] = best.Branch
	updates["parallel.fan_in.best_outcome"] = best.Status
	o := &Outcome{Status: StatusSuccess, ContextUpdates: updates, Response: best.Response, Usage: usage}
	switch {
	case failed == len(in.Messages):
		o.Status = StatusFail
		o.FailureReason = "every branch failed"
	case failed > 0:
		o.Status = StatusPartial
		notes = append(notes, "some branches failed")
	}
	o.Notes = strings.Join(notes, "; ")
	return o, nil
}

var bestRE = regexp.MustCompile(`(?im)^\W*BEST\s*[:=]\s*([A-Za-z0-9_.-]+)`)

// rank asks the node's agent to choose the best branch; pick is "" when it
// named none (or failed, which the note says).
func (h *FanIn) rank(ctx context.Context, in *Input, results []branchResult, resultsJSON string) (pick string, usage Usage, note string) {
	ask := *in
	ask.Prompt = in.Prompt + "\n\nThe parallel branches ended with these results (JSON):\n" + resultsJSON +
		"\n\nAnswer with a line BEST:<branch> naming the best branch."
	res, failed, err := h.agents.run(ctx, &ask, nil)
	switch {
	case err != nil:
		return "", usage, "ranking failed: " + err.Error()
	case failed != nil:
		return "", failed.Usage, "ranking failed: " + failed.FailureReason
	}
	if m := bestRE.FindStringSubmatch(res.Text); m != nil {
		return m[1], res.Usage, ""
	}
	return "", res.Usage, "the ranking agent named no branch (BEST:<branch>)"
}
