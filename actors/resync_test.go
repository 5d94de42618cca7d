package actors

import "testing"

// TestConsumerSeq reads the consumer sequence of both forms of a
// JetStream delivery's reply subject, and refuses anything else.
func TestConsumerSeq(t *testing.T) {
	for _, c := range []struct {
		reply string
		want  uint64
		ok    bool
	}{
		{"$JS.ACK.SY_s.nodes.1.42.7.1700000000000000000.0", 7, true},
		{"$JS.ACK.hub.ACCHASH.SY_s.nodes.2.42.18446744073709551615.1700000000000000000.3", 18446744073709551615, true},
		{"$JS.ACK.hub.ACCHASH.SY_s.nodes.2.42.9.1700000000000000000.3.r4nd0m", 9, true},
		{"$JS.ACK.SY_s.nodes.1.42..1700000000000000000.0", 0, false},
		{"$JS.ACK.SY_s.nodes.1.42.x7.1700000000000000000.0", 0, false},
		{"$JS.ACK.SY_s.nodes.1.42.7.1700000000000000000", 0, false},
		{"_INBOX.a.b.c.d.e.f.g.h", 0, false},
		{"", 0, false},
	} {
		got, ok := consumerSeq(c.reply)
		if got != c.want || ok != c.ok {
			t.Errorf("consumerSeq(%q) = %d, %v; want %d, %v", c.reply, got, ok, c.want, c.ok)
		}
	}
}

func BenchmarkConsumerSeq(b *testing.B) {
	reply := "$JS.ACK.SY_session.nodes.1.123456.123450.1700000000000000000.0"
	for b.Loop() {
		if _, ok := consumerSeq(reply); !ok {
			b.Fatal("not read")
		}
	}
}
