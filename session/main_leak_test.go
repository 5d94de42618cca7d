package session_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/switchyard/switchyard/internal/brokertest"
)

// TestMain fails the package's tests if any goroutine outlives them, but
// for what a nats-server killed in a cluster test may leave of itself
// (brokertest.LeakOptions).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, brokertest.LeakOptions()...) }
