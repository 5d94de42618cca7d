// Package agenttest holds the conformance checks every agent.Provider must
// pass: a stable name, a successful run that returns text, usage events
// that add up to the result's usage, a nil onEvent accepted, ctx honoured
// (before and, when the provider can be made to hang, during a run),
// onEvent called only from the goroutine that called Run and never after
// Run returned, and concurrent runs.
//
// A provider's tests call Run with a constructor:
//
//	func TestConformance(t *testing.T) {
//		agenttest.Run(t, func(t *testing.T) agent.Provider { return agent.NewMock(nil) })
//	}
package agenttest
