package nodes_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/nodes/agent"
)

// BenchmarkCodergenMock is the handler's own cost around an instant agent:
// the request, prompt.md, response.md and status.json.
func BenchmarkCodergenMock(b *testing.B) {
	g := load(b, codergenGraph)
	r := registry(b, nodes.Deps{Providers: providers(agent.NewMock(nil), nil)})
	h, _ := r.Lookup("codergen")
	dir := b.TempDir()
	in := &nodes.Input{SessionID: "s", Graph: g, Node: g.Node("work"), Prompt: "Build Ship", LogsDir: dir, StageDir: dir + "/work", WorkDir: dir,
		Context: map[string]string{"graph.goal": "Ship", "plan": "three steps", "last_response": strings.Repeat("x", 200)}}
	b.ReportAllocs()
	for b.Loop() {
		if o, err := h.Handle(context.Background(), in); err != nil || o.Status != nodes.StatusSuccess {
			b.Fatal(err, o)
		}
	}
}

func BenchmarkFanIn16(b *testing.B) {
	g := load(b, fanGraph)
	h, _ := registry(b, nodes.Deps{}).Lookup("parallel.fan_in")
	in := &nodes.Input{Graph: g, Node: g.Node("j")}
	for i := range 16 {
		st := nodes.StatusSuccess
		if i%5 == 0 {
			st = nodes.StatusFail
		}
		in.Messages = append(in.Messages, nodes.Message{Branch: "b" + strconv.Itoa(i), Status: st, Response: strings.Repeat("r", 1000),
			Updates: map[string]string{"finding": "f" + strconv.Itoa(i), "score": strconv.Itoa(i)}})
	}
	b.ReportAllocs()
	for b.Loop() {
		if o, err := h.Handle(context.Background(), in); err != nil || o.Status != nodes.StatusPartial {
			b.Fatal(err, o)
		}
	}
}

func BenchmarkDetectOutcomeMarker(b *testing.B) {
	text := strings.Repeat("The tests ran and most of them passed without trouble.\n", 200) + "OUTCOME:PASS\n"
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if st, ok := nodes.DetectOutcomeMarker(text); !ok || st != nodes.StatusSuccess {
			b.Fatal(st)
		}
	}
}

func BenchmarkRegistryLookup(b *testing.B) {
	r := registry(b, nodes.Deps{})
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := r.Lookup("wait.human"); !ok {
			b.Fatal("missing")
		}
	}
}
