package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/internal/brokertest"
	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/nodes/agent"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
	"github.com/switchyard/switchyard/web"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func builtinTypes() []string {
	reg := nodes.NewRegistry()
	_ = nodes.RegisterBuiltins(reg, nodes.Deps{})
	return reg.Types()
}

// served starts a reactive session shown by a web.Server behind httptest.
func served(t *testing.T, src string) (*httptest.Server, *session.Session, chan *pb.Event, string) {
	t.Helper()
	g, diags := graph.Load("t.dot", []byte(src), graph.AsSession(), graph.WithKnownTypes(builtinTypes()...))
	require.False(t, diags.HasErrors(), "%v", diags)
	b := brokertest.Start(t)
	logs := t.TempDir()
	events := make(chan *pb.Event, 10000)
	v := web.New(b)
	m := agent.NewMock(nil)
	cfg := session.Config{ID: "v1", Graph: g, Broker: b, LogsDir: logs, Durable: true, ControlAnswers: true,
		Observer: func(ev *pb.Event) { events <- ev },
		Deps:     nodes.Deps{Providers: func(string) (agent.Provider, error) { return m, nil }, DefaultProvider: "mock"}}
	v.Observe(&cfg)
	s, err := session.Start(context.Background(), cfg)
	require.NoError(t, err)
	forget := v.Add(s, web.Info{File: "t.dot", LogsDir: logs, Durable: true})
	srv := httptest.NewServer(v.Handler())
	t.Cleanup(func() { v.Close(); srv.Close(); s.Stop(); forget() })
	return srv, s, events, logs
}

func waitEvent(t *testing.T, ch chan *pb.Event, f func(*pb.Event) bool) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case ev := <-ch:
			if f(ev) {
				return
			}
		case <-deadline:
			t.Fatal("no such event within 20s")
		}
	}
}

func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	if v != nil {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
	}
	return resp.StatusCode
}

func postJSON(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func TestSessionViewAndActions(t *testing.T) {
	srv, s, events, _ := served(t, `digraph g {
		budget_tokens=5000
		ask [shape=hexagon, label="Ship it?"]
		yes [prompt="ship"]
		m   [prompt="report", trigger=manual]
		ask -> yes [label="[Y] Yes"]
		yes -> m [delivery=latest]
	}`)
	require.NoError(t, s.System().Trigger("ask", nil))
	waitEvent(t, events, func(ev *pb.Event) bool { return ev.Kind == "human.question" })

	var list []web.SessionSummary
	require.Equal(t, 200, getJSON(t, srv.URL+"/api/sessions", &list))
	require.Len(t, list, 1)
	require.Equal(t, "v1", list[0].ID)
	require.Equal(t, 1, list[0].Waiting)

	var v web.SessionView
	require.Equal(t, 200, getJSON(t, srv.URL+"/api/sessions/v1", &v))
	require.Contains(t, v.DOT, `"ask" [id="node_ask", shape="hexagon", label="Ship it?"]`)
	require.Contains(t, v.DOT, `"ask" -> "yes" [id="edge_ask.yes", label="[Y] Yes"]`)
	states := map[string]web.NodeView{}
	for _, n := range v.Nodes {
		states[n.ID] = n
	}
	require.Equal(t, "waiting", states["ask"].State)
	require.Equal(t, "waiting for an answer: Ship it?", states["ask"].Reason)
	require.Equal(t, []web.Option{{Key: "Y", Label: "[Y] Yes"}}, states["ask"].Question.Options)
	require.True(t, states["m"].Manual)
	require.Equal(t, []web.BudgetView{{Scope: "graph", Dimension: "tokens", Limit: 5000, Spent: 0}}, v.Budgets)

	// A wrong answer is refused with the options; the right one is taken.
	code, rep := postJSON(t, srv.URL+"/api/sessions/v1/answer", `{"node":"ask","choice":"maybe"}`)
	require.Equal(t, http.StatusUnprocessableEntity, code)
	require.Contains(t, rep["error"], "maybe")
	code, _ = postJSON(t, srv.URL+"/api/sessions/v1/answer", `{"node":"ask","choice":"Y","extra":1}`)
	require.Equal(t, http.StatusBadRequest, code, "unknown fields are refused")
	code, rep = postJSON(t, srv.URL+"/api/sessions/v1/answer", `{"node":"ask","choice":"Y"}`)
	require.Equal(t, http.StatusOK, code, "%v", rep)
	waitEvent(t, events, func(ev *pb.Event) bool { return ev.Kind == "node.completed" && ev.Node == "yes" })
	waitEvent(t, events, func(ev *pb.Event) bool { return ev.Kind == "gate.waiting" && ev.Node == "m" })

	require.Equal(t, 200, getJSON(t, srv.URL+"/api/sessions/v1", &v))
	for _, b := range v.Buffers {
		if b.Edge == "yes.m" {
			require.Equal(t, 1, b.Ready, "the manual node holds yes's output")
		}
	}
	code, _ = postJSON(t, srv.URL+"/api/sessions/v1/trigger", `{"node":"nosuch"}`)
	require.Equal(t, http.StatusNotFound, code)
	code, rep = postJSON(t, srv.URL+"/api/sessions/v1/trigger", `{"node":"m"}`)
	require.Equal(t, http.StatusOK, code, "%v", rep)
	waitEvent(t, events, func(ev *pb.Event) bool { return ev.Kind == "node.completed" && ev.Node == "m" })

	// The node's files, and nothing outside its directory.
	var d web.NodeDetail
	require.Equal(t, 200, getJSON(t, srv.URL+"/api/sessions/v1/nodes/yes", &d))
	var names []string
	for _, f := range d.Files {
		names = append(names, f.Name)
	}
	require.Contains(t, names, "prompt.md")
	resp, err := http.Get(srv.URL + "/api/sessions/v1/nodes/yes/files/prompt.md")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	require.Contains(t, string(body), "ship")
	for _, bad := range []string{"..%2Fcheckpoint.json", "%2E%2E", ".hidden", "a%2Fb"} {
		resp, err := http.Get(srv.URL + "/api/sessions/v1/nodes/yes/files/" + bad)
		require.NoError(t, err)
		resp.Body.Close()
		require.NotEqual(t, 200, resp.StatusCode, bad)
	}
	require.Equal(t, 404, getJSON(t, srv.URL+"/api/sessions/v1/nodes/nosuch", nil))
	require.Equal(t, 404, getJSON(t, srv.URL+"/api/sessions/nosuch", nil))

	// The durable session's checkpoints.
	var cps []session.HistoryEntry
	require.Equal(t, 200, getJSON(t, srv.URL+"/api/sessions/v1/checkpoints", &cps))
	require.NotEmpty(t, cps)
}

// A symbolic link in a node's directory does not lead out of it.
func TestFilesStayInTheNodeDirectory(t *testing.T) {
	srv, s, events, logs := served(t, `digraph g { a [prompt="x"] }`)
	require.NoError(t, s.System().Trigger("a", nil))
	waitEvent(t, events, func(ev *pb.Event) bool { return ev.Kind == "node.completed" && ev.Node == "a" })
	secret := filepath.Join(t.TempDir(), "secret.txt")
	require.NoError(t, os.WriteFile(secret, []byte("do not show"), 0o644))
	require.NoError(t, os.Symlink(secret, filepath.Join(logs, "a", "link.txt")))
	resp, err := http.Get(srv.URL + "/api/sessions/v1/nodes/a/files/link.txt")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NotEqual(t, 200, resp.StatusCode)
	require.NotContains(t, string(body), "do not show")
}

// The event stream sends what happened, then what happens.
func TestEventStream(t *testing.T) {
	srv, s, events, _ := served(t, `digraph g { a [prompt="x"] }`)
	require.NoError(t, s.System().Trigger("a", nil))
	waitEvent(t, events, func(ev *pb.Event) bool { return ev.Kind == "node.completed" && ev.Node == "a" })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/sessions/v1/events", nil)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	sc := bufio.NewScanner(resp.Body)
	seen := map[string]int{}
	next := func() web.Event {
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var ev web.Event
				require.NoError(t, json.Unmarshal([]byte(data), &ev))
				return ev
			}
		}
		t.Fatalf("stream ended: %v", sc.Err())
		return web.Event{}
	}
	for seen["node.completed"] < 1 {
		seen[next().Kind]++
	}
	require.Equal(t, 1, seen["session.started"], "the backlog")
	require.NoError(t, s.System().Trigger("a", nil))
	for seen["node.completed"] < 2 {
		seen[next().Kind]++ // live
	}
}
