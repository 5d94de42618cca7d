package main

import (
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/stretchr/testify/require"
)

// Tracing is off by default and follows the standard OTEL_* variables.
func TestTracingWanted(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want bool
		err  string
	}{
		{env: nil, want: false},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, want: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, want: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, want: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, want: false},
		{env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, want: false},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: "only otlp and none"},
	} {
		got, err := tracingWanted(func(k string) string { return tc.env[k] })
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, tc.want, got, "%v", tc.env)
	}
}

// With an OTLP endpoint set, run exports its spans there over OTLP/HTTP:
// a span for the run, one per node firing under it, one per attempt.
func TestRunExportsSpansOverOTLP(t *testing.T) {
	var mu sync.Mutex
	names := map[string]int{}
	traces := map[string]bool{}
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil || r.URL.Path != "/v1/traces" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					names[sp.Name]++
					traces[hex.EncodeToString(sp.TraceId)] = true
				}
			}
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(nil)
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	code, _, errOut := cli(t, "run", "../../examples/hello.dot", "--durable=false", "--logs", t.TempDir(), "--data", t.TempDir())
	require.Equal(t, 0, code, errOut)
	// run flushes its spans before it exits.
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 1, names["run hello"], "%v", names)
	require.Equal(t, 1, names["fire start"], "%v", names)
	require.Equal(t, 1, names["fire exit"], "%v", names)
	require.GreaterOrEqual(t, names["attempt 1"], 3, "%v", names)
	require.Len(t, traces, 1, "one trace for the run")
}
