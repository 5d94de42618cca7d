package main

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/switchyard/switchyard/internal/brokertest"
)

// TestMain fails the package's tests if any goroutine outlives them. The
// Gemini SDK's dependencies link in OpenCensus, whose package init starts
// one worker for the life of the process: not a leak of ours; nor is what
// a nats-server killed in a cluster test may leave (brokertest.LeakOptions).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, append(brokertest.LeakOptions(),
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))...)
}
