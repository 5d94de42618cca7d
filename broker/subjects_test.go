package broker_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
)

func TestSubjects(t *testing.T) {
	for _, tc := range []struct {
		subj string
		want broker.Subject
	}{
		{broker.Edge("s1", "a.b"), broker.Subject{Session: "s1", Kind: broker.KindEdge, From: "a", To: "b"}},
		{broker.Edge("s1", "a.b.2"), broker.Subject{Session: "s1", Kind: broker.KindEdge, From: "a", To: "b", Index: "2"}},
		{broker.NodeIn("s-2", "review"), broker.Subject{Session: "s-2", Kind: broker.KindNode, Node: "review"}},
		{broker.Control("s1", "answer"), broker.Subject{Session: "s1", Kind: broker.KindControl, Verb: "answer"}},
		{broker.Event("s1", "node.completed"), broker.Subject{Session: "s1", Kind: broker.KindEvent, Event: "node.completed"}},
		{broker.Event("s1", "stall"), broker.Subject{Session: "s1", Kind: broker.KindEvent, Event: "stall"}},
		{broker.DeadLetter("s1"), broker.Subject{Session: "s1", Kind: broker.KindDLQ}},
	} {
		t.Run(tc.subj, func(t *testing.T) {
			got, err := broker.ParseSubject(tc.subj)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.subj, got.String())
		})
	}
	t.Run("layout", func(t *testing.T) {
		require.Equal(t, "sy.s1.edge.a.b", broker.Edge("s1", "a.b"))
		require.Equal(t, "sy.s1.node.a.in", broker.NodeIn("s1", "a"))
		require.Equal(t, "sy.s1.ctl.trigger", broker.Control("s1", "trigger"))
		require.Equal(t, "sy.s1.evt.node.completed", broker.Event("s1", "node.completed"))
		require.Equal(t, "sy.s1.evt.>", broker.AllEvents("s1"))
		require.Equal(t, "sy.s1.>", broker.SessionAll("s1"))
		require.Equal(t, "sy.s1.dlq", broker.DeadLetter("s1"))
		require.Equal(t, "sy.s1.w.>", broker.AllStored("s1"))
	})
	t.Run("stored", func(t *testing.T) {
		for _, subj := range []string{broker.Edge("s1", "a.b"), broker.Edge("s-2", "a.b.3"), broker.NodeIn("s1", "w"), broker.NodeIn("w", "w")} {
			st := broker.Stored(subj)
			require.NotEqual(t, subj, st)
			_, err := broker.ParseSubject(st)
			require.ErrorIs(t, err, broker.ErrNotSwitchyard, "a Stored subject is none of the outside layout's")
			require.Equal(t, subj, broker.Unstored(st))
			require.Equal(t, subj, broker.Unstored(subj), "not a Stored subject: as it is")
		}
		require.Equal(t, "sy.s1.w.edge.a.b", broker.Stored(broker.Edge("s1", "a.b")))
		require.Equal(t, "sy.s1.w.node.a.in", broker.Stored(broker.NodeIn("s1", "a")))
	})
	t.Run("edge ids", func(t *testing.T) {
		s, err := broker.ParseSubject("sy.s1.edge.a.b.3")
		require.NoError(t, err)
		require.Equal(t, "a.b.3", s.EdgeID())
		s, err = broker.ParseSubject("sy.s1.node.a.in")
		require.NoError(t, err)
		require.Empty(t, s.EdgeID())
	})
	for _, bad := range []string{"", "sy", "sy.s1", "x.s1.edge.a.b", "sy.s1.edge.a", "sy.s1.edge.a.b.x", "sy.1s.dlq",
		"sy.s1.node.a", "sy.s1.node.a.out", "sy.s1.node.a.in.x", "sy.s1.ctl", "sy.s1.ctl.a.b", "sy.s1.evt", "sy.s1.evt.",
		"sy.s1.evt.a..b", "sy.s1.what.a", "sy.s1.dlq.x", "sy.s1.edge.a.b c", "sy.*.edge.a.b", "sy.s1.edge.>",
		"sy.s1.evt.>", "sy.s1.edge.a.b.", "sy.s1.edge.a.b.-1", "sy..dlq", "sy.s1.edge.a.b.2.3"} {
		t.Run("invalid "+strconv.Quote(bad), func(t *testing.T) {
			_, err := broker.ParseSubject(bad)
			require.ErrorIs(t, err, broker.ErrNotSwitchyard)
		})
	}
	t.Run("tokens", func(t *testing.T) {
		for tok, ok := range map[string]bool{"_a-1": true, "s0a1b2": true, "A": true, "": false, "1a": false, "-a": false,
			"a.b": false, "a*": false, "a>": false, "a b": false, "é": false} {
			require.Equal(t, ok, broker.ValidToken(tok), tok)
		}
	})
}

// FuzzSubjectName checks that ParseSubject never panics, that what it
// accepts builds back to the same subject, and that what the builders make
// from valid ids parses back to those ids.
func FuzzSubjectName(f *testing.F) {
	for _, s := range []string{"sy.s1.edge.a.b", "sy.s1.edge.a.b.3", "sy.s.node.n.in", "sy.s.ctl.x", "sy.s.evt.a.b",
		"sy.s.dlq", "sy..edge", "a.b.c", "sy.s.evt.>"} {
		f.Add(s, "s1", "a", "b", uint8(0))
	}
	f.Add("", "s-1", "from_x", "to-y", uint8(7))
	f.Fuzz(func(t *testing.T, subj, session, a, b string, n uint8) {
		if s, err := broker.ParseSubject(subj); err == nil {
			if got := s.String(); got != subj {
				t.Fatalf("round trip: %q -> %+v -> %q", subj, s, got)
			}
		}
		if !broker.ValidToken(session) || !broker.ValidToken(a) || !broker.ValidToken(b) {
			return
		}
		edgeID := a + "." + b
		if n > 0 {
			edgeID += "." + strconv.Itoa(int(n))
		}
		for subj, want := range map[string]broker.Subject{
			broker.Edge(session, edgeID):   {Session: session, Kind: broker.KindEdge, From: a, To: b, Index: map[bool]string{true: strconv.Itoa(int(n))}[n > 0]},
			broker.NodeIn(session, a):      {Session: session, Kind: broker.KindNode, Node: a},
			broker.Control(session, a):     {Session: session, Kind: broker.KindControl, Verb: a},
			broker.Event(session, a+"."+b): {Session: session, Kind: broker.KindEvent, Event: a + "." + b},
			broker.DeadLetter(session):     {Session: session, Kind: broker.KindDLQ},
		} {
			got, err := broker.ParseSubject(subj)
			if err != nil {
				t.Fatalf("%q: %v", subj, err)
			}
			if got != want {
				t.Fatalf("%q: got %+v, want %+v", subj, got, want)
			}
		}
	})
}
