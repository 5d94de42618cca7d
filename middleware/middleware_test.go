package middleware_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/switchyard/switchyard/clock"
	"github.com/switchyard/switchyard/graph"
	"github.com/switchyard/switchyard/middleware"
	"github.com/switchyard/switchyard/nodes"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func input(node string) *nodes.Input {
	return &nodes.Input{SessionID: "s1", Node: &graph.Node{ID: node, Attrs: graph.Attrs{}}, Type: "custom", Attempt: 1}
}

func succeed(resp string) nodes.HandlerFunc {
	return func(context.Context, *nodes.Input) (*nodes.Outcome, error) {
		return &nodes.Outcome{Status: nodes.StatusSuccess, Response: resp}, nil
	}
}

func TestRecover(t *testing.T) {
	tests := []struct {
		name    string
		h       nodes.HandlerFunc
		wantErr string
	}{
		{"panic with a value", func(context.Context, *nodes.Input) (*nodes.Outcome, error) { panic("kaboom") }, "kaboom"},
		{"panic with an error", func(context.Context, *nodes.Input) (*nodes.Outcome, error) { panic(errors.New("broken")) }, "broken"},
		{"nil map write", func(context.Context, *nodes.Input) (*nodes.Outcome, error) {
			var m map[string]string
			m["x"] = "y"
			return nil, nil
		}, "nil map"},
		{"no panic", succeed("ok"), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, err := nodes.Chain(tc.h, middleware.Recover()).Handle(context.Background(), input("n"))
			if tc.wantErr == "" {
				require.NoError(t, err)
				require.Equal(t, "ok", o.Response)
				return
			}
			require.Nil(t, o)
			require.ErrorContains(t, err, tc.wantErr)
			require.ErrorContains(t, err, "goroutine", "the stack is in the reason")
		})
	}
}

func TestTimeoutOnFakeClock(t *testing.T) {
	clk := clock.NewFake(epoch)
	started := make(chan struct{})
	slow := nodes.HandlerFunc(func(ctx context.Context, _ *nodes.Input) (*nodes.Outcome, error) {
		close(started)
		<-ctx.Done()
		return &nodes.Outcome{Status: nodes.StatusFail, FailureReason: "interrupted"}, nil
	})
	done := make(chan error, 1)
	go func() {
		_, err := nodes.Chain(slow, middleware.Timeout(time.Minute, middleware.Clock(clk))).Handle(context.Background(), input("n"))
		done <- err
	}()
	<-started
	clk.Advance(59 * time.Second)
	select {
	case err := <-done:
		t.Fatalf("timed out before its time: %v", err)
	default:
	}
	clk.Advance(time.Second)
	select {
	case err := <-done:
		require.ErrorIs(t, err, middleware.ErrTimeout)
		require.ErrorContains(t, err, "after 1m0s")
	case <-time.After(10 * time.Second):
		t.Fatal("the handler was not cancelled at the timeout")
	}

	// A fast handler is untouched and leaves no timer behind.
	o, err := nodes.Chain(succeed("fast"), middleware.Timeout(time.Minute, middleware.Clock(clk))).Handle(context.Background(), input("n"))
	require.NoError(t, err)
	require.Equal(t, "fast", o.Response)
	require.Zero(t, clk.Pending())

	// An earlier deadline of the caller still holds (real clock).
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	_, err = nodes.Chain(nodes.HandlerFunc(func(ctx context.Context, _ *nodes.Input) (*nodes.Outcome, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}), middleware.Timeout(time.Hour)).Handle(ctx, input("n"))
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestRetryWithBackoff(t *testing.T) {
	clk := clock.NewFake(epoch)
	runs := 0
	flaky := nodes.HandlerFunc(func(context.Context, *nodes.Input) (*nodes.Outcome, error) {
		runs++
		if runs < 3 {
			return nil, errors.New("connection reset")
		}
		return &nodes.Outcome{Status: nodes.StatusSuccess, Response: "done"}, nil
	})
	var waits []time.Duration
	backoff := func(n int) time.Duration { d := time.Duration(n) * time.Second; waits = append(waits, d); return d }
	in := input("n")
	var emitted []string
	in.Emit = func(kind string, f map[string]any) { emitted = append(emitted, kind+":"+f["message"].(string)) }

	type result struct {
		o   *nodes.Outcome
		err error
	}
	done := make(chan result, 1)
	go func() {
		o, err := nodes.Chain(flaky, middleware.Retry(5, backoff, middleware.Clock(clk))).Handle(context.Background(), in)
		done <- result{o, err}
	}()
	// Drive the backoff: each wait is a pending timer on the fake clock.
	for i := 1; i <= 2; i++ {
		waitPending(t, clk)
		clk.Advance(time.Duration(i) * time.Second)
	}
	r := <-done
	require.NoError(t, r.err)
	require.Equal(t, "done", r.o.Response)
	require.Equal(t, 3, runs)
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second}, waits)
	require.Contains(t, r.o.Notes, "3 runs")
	require.Equal(t, []string{"node.retrying:connection reset", "node.retrying:connection reset"}, emitted)

	// Exhausted: the last failure comes back.
	runs = 0
	o, err := nodes.Chain(nodes.HandlerFunc(func(context.Context, *nodes.Input) (*nodes.Outcome, error) {
		runs++
		return &nodes.Outcome{Status: nodes.StatusFail, FailureReason: "still broken"}, nil
	}), middleware.Retry(2, nil)).Handle(context.Background(), input("n"))
	require.NoError(t, err)
	require.Equal(t, nodes.StatusFail, o.Status)
	require.Equal(t, 2, runs)
}

func waitPending(t *testing.T, clk *clock.Fake) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for clk.Pending() == 0 {
		select {
		case <-clk.Changed():
		case <-deadline:
			t.Fatal("no timer was set")
		}
	}
}

func TestMetrics(t *testing.T) {
	clk := clock.NewFake(epoch)
	m := middleware.NewMetrics(middleware.Clock(clk))
	timed := func(d time.Duration, o *nodes.Outcome, err error) nodes.Handler {
		return nodes.HandlerFunc(func(context.Context, *nodes.Input) (*nodes.Outcome, error) {
			clk.Advance(d)
			return o, err
		})
	}
	ctx := context.Background()
	_, _ = nodes.Chain(timed(2*time.Second, &nodes.Outcome{Status: nodes.StatusSuccess, Usage: nodes.Usage{InputTokens: 10, Cost: 0.5}}, nil), m.Middleware()).Handle(ctx, input("a"))
	_, _ = nodes.Chain(timed(5*time.Second, &nodes.Outcome{Status: nodes.StatusFail}, nil), m.Middleware()).Handle(ctx, input("a"))
	_, _ = nodes.Chain(timed(time.Second, nil, errors.New("boom")), m.Middleware()).Handle(ctx, input("b"))

	a := m.Node("a")
	require.Equal(t, int64(2), a.Runs)
	require.Equal(t, int64(1), a.Failures)
	require.Equal(t, 7*time.Second, a.Duration)
	require.Equal(t, 5*time.Second, a.Max)
	require.Equal(t, nodes.Usage{InputTokens: 10, Cost: 0.5}, a.Usage)
	snap := m.Snapshot()
	require.Len(t, snap, 2)
	require.Equal(t, "b", snap[1].Node)
	require.Equal(t, int64(1), snap[1].Failures)
	require.Zero(t, m.Node("never").Runs)
}

func TestLogging(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx := nodes.WithCaller(context.Background(), nodes.Caller{Tenant: "acme", Trace: "t-1"})
	_, _ = nodes.Chain(succeed("ok"), middleware.Logging(l)).Handle(ctx, input("draft"))
	_, _ = nodes.Chain(nodes.HandlerFunc(func(context.Context, *nodes.Input) (*nodes.Outcome, error) {
		return &nodes.Outcome{Status: nodes.StatusFail, FailureReason: "no draft"}, nil
	}), middleware.Logging(l)).Handle(ctx, input("review"))

	var lines []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m))
		lines = append(lines, m)
	}
	require.Len(t, lines, 4)
	require.Equal(t, "node started", lines[0]["msg"])
	require.Equal(t, "DEBUG", lines[0]["level"])
	require.Equal(t, "node finished", lines[1]["msg"])
	require.Equal(t, "INFO", lines[1]["level"])
	require.Equal(t, "draft", lines[1]["node"])
	require.Equal(t, "success", lines[1]["status"])
	require.Equal(t, "acme", lines[1]["tenant"])
	require.Equal(t, "t-1", lines[1]["trace"])
	require.Equal(t, "WARN", lines[3]["level"])
	require.Equal(t, "fail", lines[3]["status"])
	require.Equal(t, "no draft", lines[3]["error"])
}
