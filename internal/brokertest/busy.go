package brokertest

import (
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// BusySubscriber subscribes on nc a handler that blocks on the first of two
// messages it publishes until unblock is closed, counting the messages
// handled, and returns once that handler is running: the second message
// waits at the subscription, received and not handled (what a drain of the
// connection lets it handle, and a close drops).
func BusySubscriber(t testing.TB, nc *nats.Conn) (handled func() int, unblock chan struct{}) {
	t.Helper()
	var mu sync.Mutex
	n := 0
	entered, unblock := make(chan struct{}), make(chan struct{})
	if _, err := nc.Subscribe("test.busy", func(*nats.Msg) {
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		if first {
			close(entered)
			<-unblock
		}
	}); err != nil {
		t.Fatalf("brokertest: subscribe: %v", err)
	}
	for range 2 {
		if err := nc.Publish("test.busy", nil); err != nil {
			t.Fatalf("brokertest: publish: %v", err)
		}
	}
	// Both are at the subscription: the server sent them before its PONG.
	if err := nc.Flush(); err != nil {
		t.Fatalf("brokertest: flush: %v", err)
	}
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("brokertest: the subscriber got no message")
	}
	return func() int { mu.Lock(); defer mu.Unlock(); return n }, unblock
}
