package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// get fetches url with an optional bearer token.
func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// serveHTTP starts `switchyard serve` with --http and the NATS listener's
// credentials; it returns the web URL, and stops serve when the test ends.
func serveHTTP(t *testing.T, dot string, extra ...string) (web string, natsURL string, stderr *syncBuffer) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "g.dot")
	require.NoError(t, os.WriteFile(file, []byte(dot), 0o644))
	addr, httpAddr := freeAddr(t), freeAddr(t)
	natsURL = "nats://" + addr
	stderr = &syncBuffer{}
	var stdout syncBuffer
	done := make(chan int, 1)
	args := append([]string{"serve", file, "--id", "w1", "--listen", addr, "--token", "out", "--admin-token", "adm",
		"--http", httpAddr, "--data", filepath.Join(dir, "data"), "--logs", filepath.Join(dir, "logs")}, extra...)
	go func() { done <- execute(args, &stdout, stderr) }()
	web = "http://" + httpAddr
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(stderr.String(), "outside clients connect to") {
		select {
		case code := <-done:
			t.Fatalf("serve exited with %d: %s", code, stderr.String())
		default:
		}
		require.True(t, time.Now().Before(deadline), "serve did not start: %s", stderr.String())
		time.Sleep(20 * time.Millisecond) // polling serve's output, not synchronising work
	}
	t.Cleanup(func() {
		// The test may have stopped it already: then serve is exiting.
		_, _, _ = cli(t, "stop", "w1", "--nats", natsURL, "--token", "adm", "--timeout", "5s")
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("serve did not exit")
		}
	})
	return web, natsURL, stderr
}

// /metrics is served on --http with the NATS listener's credentials.
func TestServeMetricsEndpoint(t *testing.T) {
	web, natsURL, _ := serveHTTP(t, `digraph g { a [prompt="answer"]; b [prompt="sum up"]; a -> b }`)
	code, _ := get(t, web+"/metrics", "")
	require.Equal(t, http.StatusUnauthorized, code, "nothing without a credential")
	code, _ = get(t, web+"/metrics", "wrong")
	require.Equal(t, http.StatusUnauthorized, code)

	c, _, errOut := cli(t, "pub", "w1", "a", "hello", "--nats", natsURL, "--token", "out")
	require.Equal(t, 0, c, errOut)
	// The firings show up on the scrape once b has run.
	deadline := time.Now().Add(20 * time.Second)
	var body string
	for {
		code, body = get(t, web+"/metrics", "out")
		require.Equal(t, http.StatusOK, code)
		if strings.Contains(body, `switchyard_node_firings_total{node="b",session="w1",status="success"} 1`) {
			break
		}
		require.True(t, time.Now().Before(deadline), "no firing of b on the scrape:\n%s", body)
		time.Sleep(50 * time.Millisecond) // polling a scrape, as Prometheus does
	}
	require.Contains(t, body, `switchyard_node_firings_total{node="a",session="w1",status="success"} 1`)
	require.Contains(t, body, `switchyard_sessions{state="running"} 1`)
	require.Contains(t, body, `switchyard_handler_duration_seconds_count{node="a",session="w1"} 1`)
	require.Contains(t, body, `switchyard_edge_buffer_depth{edge="a.b",node="b",session="w1"} 0`)
	require.Contains(t, body, "switchyard_journal_write_seconds_count")
	require.Contains(t, body, "go_goroutines", "the Go runtime's metrics too")
}

// --http refuses to serve without a credential, except on loopback with
// --http-insecure-loopback.
func TestHTTPNeedsACredential(t *testing.T) {
	file := filepath.Join(t.TempDir(), "g.dot")
	require.NoError(t, os.WriteFile(file, []byte(`digraph g { a [prompt="x"] }`), 0o644))
	code, _, errOut := cli(t, "serve", file, "--http", "127.0.0.1:0", "--durable=false")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "--http needs a credential")
	code, _, errOut = cli(t, "serve", file, "--http", "0.0.0.0:0", "--http-insecure-loopback", "--durable=false")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "not a loopback address")
}
