package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// TestLiveLogShowsEveryLimit: serve's default output has a line for every
// limit a node can hit and every refusal on the way in.
func TestLiveLogShowsEveryLimit(t *testing.T) {
	at := timestamppb.New(time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC))
	var out syncBuffer
	log := &serveLog{w: &out}
	for _, kind := range []string{"iterations.exceeded", "iterations.waiting", "budget.threshold", "budget.exceeded",
		"stall.detected", "node.refused", "envelope.rejected", "human.answer.refused"} {
		log.render(&pb.Event{Kind: kind, SessionId: "s1", Node: "a", Message: "because " + kind + "\nmore", Time: at})
		require.Contains(t, out.String(), "2026-11-23 09:00:00 s1  a", kind)
		require.Contains(t, out.String(), "because "+kind+"\n", "the first line of the reason")
	}
	before := out.String()
	log.render(&pb.Event{Kind: "checkpoint.saved", SessionId: "s1", Node: "a", Time: at})
	require.Equal(t, before, out.String(), "bookkeeping events are left out")
}
