package actors

import "testing"

// BenchmarkIDs: what signing an output's id and proving and checking that
// it is the runtime's own cost per hop.
func BenchmarkIDs(b *testing.B) {
	g := newIDSigner(NewIDKey())
	s := &System{ids: g}
	b.ReportAllocs()
	for b.Loop() {
		id := g.sign("session.node.12.node.next")
		if !s.ownEnvelope(id, g.proof(id)) {
			b.Fatal("not own")
		}
	}
}
