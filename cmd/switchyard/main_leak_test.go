package main

import (
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/switchyard/switchyard/internal/brokertest"
)

// TestMain fails the package's tests if any goroutine outlives them. The
// Gemini SDK's dependencies link in OpenCensus, whose package init starts
// one worker for the life of the process: not a leak of ours; nor is what
// a nats-server killed in a cluster test may leave (brokertest.LeakOptions).
// The CLI built for the tests (switchyardBinary) is removed at the end: a
// copy of about 90 MB per run filled the shared disk.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, append(brokertest.LeakOptions(),
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
		goleak.Cleanup(func(code int) {
			if binPath != "" {
				_ = os.RemoveAll(filepath.Dir(binPath))
			}
			os.Exit(code)
		}))...)
}
