package broker_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/internal/brokertest"
)

// envelopeSize is the size of a typical encoded envelope.
const envelopeSize = 430

// BenchmarkRawHop measures one core NATS hop on the embedded server over
// in-process connections: a publish of a ~430-byte payload and its receipt
// by a subscriber on another connection, one at a time (latency, not
// throughput).
func BenchmarkRawHop(b *testing.B) {
	br := brokertest.Start(b)
	sub, err := br.NewConn()
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Close()
	got := make(chan struct{}, 1)
	subj := broker.Edge("bench", "a.b")
	s, err := sub.Subscribe(subj, func(*nats.Msg) { got <- struct{}{} })
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Unsubscribe() }()
	if err := sub.Flush(); err != nil {
		b.Fatal(err)
	}
	pub := br.Conn()
	payload := make([]byte, envelopeSize)
	timeout := time.NewTimer(time.Hour)
	defer timeout.Stop()
	b.SetBytes(envelopeSize)
	b.ReportAllocs()
	for b.Loop() {
		if err := pub.Publish(subj, payload); err != nil {
			b.Fatal(err)
		}
		timeout.Reset(10 * time.Second)
		select {
		case <-got:
		case <-timeout.C:
			b.Fatal("the message did not arrive")
		}
	}
}

// BenchmarkJetStreamPublish measures an acknowledged, de-duplicated
// JetStream publish of a ~430-byte payload into a session's work stream
// (memory storage).
func BenchmarkJetStreamPublish(b *testing.B) {
	br := brokertest.Start(b)
	js := br.JetStream()
	if _, err := broker.EnsureSessionStream(ctx(b), js, "bench", broker.MemoryStorage); err != nil {
		b.Fatal(err)
	}
	subj := broker.Edge("bench", "a.b")
	payload := make([]byte, envelopeSize)
	c := ctx(b)
	b.SetBytes(envelopeSize)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := js.Publish(c, subj, payload); err != nil {
			b.Fatal(err)
		}
	}
}
