package session

import (
	"sync"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/internal/warm"
)

// The goroutines a session starts for its work — its journal's writer (one
// per batch of records), its event loop, its System's mailbox goroutines
// and event publisher (actors.Config.Go), the removal of a finished
// pipeline's store and the preparation of the next — start on goroutines
// its broker keeps (internal/warm), waiting with their stacks grown: a new
// goroutine grows its stack, copying it, the first time it goes deep, and
// that was 3.8% of a durable 10-node pipeline's CPU. The owner of each job
// waits for it; the broker's Close ends the goroutines that wait.

// goroutineSets holds each broker's kept goroutines (*broker.Broker →
// *warm.Pool), closed at the broker's Close.
var goroutineSets sync.Map

// maxKeptGoroutines is how many goroutines a broker keeps waiting.
const maxKeptGoroutines = 16

// goroutinesOf is b's kept goroutines, made on first use; nil once b is
// closing.
func goroutinesOf(b *broker.Broker) *warm.Pool {
	return ofBroker(&goroutineSets, b, func() *warm.Pool { return warm.New(maxKeptGoroutines) }, (*warm.Pool).Close)
}
