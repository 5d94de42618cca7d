package agent_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/switchyard/switchyard/nodes/agent"
)

// A mock script gives each node a list of results: each run takes the
// next, the last repeats; other nodes succeed.
func ExampleParseMock() {
	m, err := agent.ParseMock([]byte(`{
		"review": [{"status": "fail", "notes": "missing tests"}, {"status": "success", "response": "LGTM"}],
		"deploy": [{"error": "rate_limit"}]
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 3 {
		res, _ := m.Run(context.Background(), &agent.Request{NodeID: "review"}, nil)
		fmt.Println(res.Status, res.Text)
	}
	_, err = m.Run(context.Background(), &agent.Request{NodeID: "deploy"}, nil)
	fmt.Println(err, errors.Is(err, agent.ErrRetryable))
	// Output:
	// fail [mock] review: fail
	// success LGTM
	// success LGTM
	// mock: scripted rate_limit error for node deploy true
}
