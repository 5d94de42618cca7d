package nodes

import (
	"context"
	"encoding/json"
	"sort"
	"strconv"
)

// FanIn is the parallel.fan_in handler. The runtime fires it once with one
// message per branch of the fork; it merges what every branch learned under
// parallel.<branch>.<key>, writes parallel.results (each branch's status
// and response) and chooses the best branch. It succeeds when every branch
// succeeded, is partial_success when some failed and fails when all did.
type FanIn struct{}

var _ Handler = FanIn{}

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
func (FanIn) Handle(_ context.Context, in *Input) (*Outcome, error) {
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
	updates["parallel.fan_in.best_id"] = results[0].Branch
	updates["parallel.fan_in.best_outcome"] = results[0].Status
	o := &Outcome{Status: StatusSuccess, ContextUpdates: updates, Response: results[0].Response}
	switch {
	case failed == len(in.Messages):
		o.Status = StatusFail
		o.FailureReason = "every branch failed"
	case failed > 0:
		o.Status = StatusPartial
		o.Notes = "some branches failed"
	}
	return o, nil
}
