package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

func TestWatchShowsUsagePerNodeAndSession(t *testing.T) {
	v := &watchView{session: "s1", nodes: map[string]*nodeView{}, budgets: map[string]string{}}
	for _, ev := range []*pb.Event{
		{Kind: "node.completed", Node: "plan", Status: "success", Usage: &pb.Usage{InputTokens: 100, OutputTokens: 20, Cost: 0.01}},
		{Kind: "node.completed", Node: "code", Status: "success", Usage: &pb.Usage{InputTokens: 300, OutputTokens: 80, Cost: 0.05}},
		{Kind: "node.completed", Node: "code", Status: "success", Usage: &pb.Usage{InputTokens: 200, OutputTokens: 40, Cost: 0.02}},
		{Kind: "node.completed", Node: "gate", Status: "success"},
		{Kind: "session.completed", Status: "success"},
	} {
		v.apply(ev)
	}
	var out bytes.Buffer
	v.render(&out)
	s := out.String()
	require.Contains(t, s, "session s1 — success   tokens 600 in / 140 out   cost $0.0800")
	require.Regexp(t, `code\s+success\s+2\s+500/120 tok \$0\.0700`, s)
	require.Regexp(t, `plan\s+success\s+1\s+100/20 tok \$0\.0100`, s)
	require.Regexp(t, `gate\s+success\s+1\s+\n`, s)
}
