package broker_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
)

func TestSubjects(t *testing.T) {
	for _, tc := range []struct {
		subj string
		want broker.Subject
	}{
		{broker.Edge("s1", "a.b"), broker.Subject{Session: "s1", Kind: "edge", From: "a", To: "b"}},
		{broker.Edge("s1", "a.b.2"), broker.Subject{Session: "s1", Kind: "edge", From: "a", To: "b", Index: "2"}},
		{broker.NodeIn("s-2", "review"), broker.Subject{Session: "s-2", Kind: "node", Node: "review"}},
		{broker.Control("s1", "answer"), broker.Subject{Session: "s1", Kind: "ctl", Verb: "answer"}},
		{broker.Event("s1", "node.completed"), broker.Subject{Session: "s1", Kind: "evt", Verb: "node.completed"}},
		{broker.DeadLetter("s1"), broker.Subject{Session: "s1", Kind: "dlq"}},
	} {
		t.Run(tc.subj, func(t *testing.T) {
			got, err := broker.ParseSubject(tc.subj)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.subj, got.String())
		})
	}
	for _, bad := range []string{"", "sy", "x.s1.edge.a.b", "sy.s1.edge.a", "sy.s1.edge.a.b.x", "sy.1s.dlq",
		"sy.s1.node.a", "sy.s1.node.a.out", "sy.s1.ctl", "sy.s1.evt", "sy.s1.what.a", "sy.s1.dlq.x", "sy.s1.edge.a.b c"} {
		_, err := broker.ParseSubject(bad)
		require.Error(t, err, bad)
	}
	require.True(t, broker.ValidToken("_a-1"))
	require.False(t, broker.ValidToken("1a"))
	require.False(t, broker.ValidToken("a.b"))
	require.False(t, broker.ValidToken("a*"))
}

func FuzzSubjectName(f *testing.F) {
	for _, s := range []string{"sy.s1.edge.a.b", "sy.s1.edge.a.b.3", "sy.s.node.n.in", "sy.s.ctl.x", "sy.s.evt.a.b", "sy.s.dlq", "sy..edge", "a.b.c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, subj string) {
		s, err := broker.ParseSubject(subj)
		if err != nil {
			return
		}
		if got := s.String(); got != subj {
			t.Fatalf("round trip: %q -> %+v -> %q", subj, s, got)
		}
	})
}
