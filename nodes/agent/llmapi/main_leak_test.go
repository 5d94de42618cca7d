package llmapi_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them (a
// stream left open, a request still in flight). OpenCensus, linked in by
// the Gemini SDK's dependencies, starts one worker at init for the life of
// the process: not a leak of ours.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}
