package actors

import "testing"

// TestAckSeqs reads the stream and consumer sequences of both forms of a
// JetStream delivery's reply subject, and refuses anything else; the
// stream sequence is what nats.go's Metadata reads (0 where it fails).
func TestAckSeqs(t *testing.T) {
	for _, c := range []struct {
		reply    string
		stream   uint64
		consumer uint64
		ok       bool
	}{
		{"$JS.ACK.SY_s.nodes.1.42.7.1700000000000000000.0", 42, 7, true},
		{"$JS.ACK.hub.ACCHASH.SY_s.nodes.2.42.18446744073709551615.1700000000000000000.3", 42, 18446744073709551615, true},
		{"$JS.ACK.hub.ACCHASH.SY_s.nodes.2.42.9.1700000000000000000.3.r4nd0m", 42, 9, true},
		{"$JS.ACK._.ACCHASH.SY_s.nodes.2.18446744073709551615.9.1700000000000000000.3.r4nd0m.more", 18446744073709551615, 0, false},
		{"$JS.ACK.SY_s.nodes.1.42..1700000000000000000.0", 42, 0, false},
		{"$JS.ACK.SY_s.nodes.1.42.x7.1700000000000000000.0", 42, 0, false},
		{"$JS.ACK.SY_s.nodes.1.4x2.7.1700000000000000000.0", 0, 7, true},
		{"$JS.ACK.SY_s.nodes.1.42.7.1700000000000000000", 0, 0, false},
		{"$JS.ACK.hub.ACCHASH.SY_s.nodes.2.42.9.1700000000000000000", 0, 0, false},
		{"$JS.ACX.SY_s.nodes.1.42.7.1700000000000000000.0", 0, 0, false},
		{"_INBOX.a.b.c.d.e.f.g.h", 0, 0, false},
		{"", 0, 0, false},
	} {
		stream, consumer, ok := ackSeqs(c.reply)
		if stream != c.stream || consumer != c.consumer || ok != c.ok {
			t.Errorf("ackSeqs(%q) = %d, %d, %v; want %d, %d, %v", c.reply, stream, consumer, ok, c.stream, c.consumer, c.ok)
		}
	}
}

func BenchmarkAckSeqs(b *testing.B) {
	reply := "$JS.ACK.SY_session.nodes.1.123456.123450.1700000000000000000.0"
	for b.Loop() {
		if _, _, ok := ackSeqs(reply); !ok {
			b.Fatal("not read")
		}
	}
}
