package agenttest

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/nodes/agent"
)

// config is what the options set.
type config struct {
	name     string
	prompt   string
	want     string
	hang     string
	parallel int
	deadline time.Duration
	request  func(t *testing.T, req *agent.Request)
}

// Option adjusts the checks to a provider.
type Option func(*config)

// WithName makes Run check the provider's Name against name.
func WithName(name string) Option { return func(c *config) { c.name = name } }

// WithPrompt sets a prompt the provider answers successfully (default
// "Say hello") and a piece of text the answer must contain ("" = any
// non-empty text).
func WithPrompt(prompt, want string) Option {
	return func(c *config) { c.prompt, c.want = prompt, want }
}

// WithHangPrompt sets a prompt on which the provider runs until cancelled;
// it enables the check that cancelling ctx during a run ends it promptly.
func WithHangPrompt(prompt string) Option { return func(c *config) { c.hang = prompt } }

// WithParallel sets how many runs the concurrency check starts (default 4).
func WithParallel(n int) Option { return func(c *config) { c.parallel = n } }

// WithDeadline bounds how long one run may take before the check fails
// (default 30s; cancellation must end a run within it too).
func WithDeadline(d time.Duration) Option { return func(c *config) { c.deadline = d } }

// WithRequest lets the caller complete each request (a work directory, a
// model...) before it is run.
func WithRequest(f func(t *testing.T, req *agent.Request)) Option {
	return func(c *config) { c.request = f }
}

// Run checks the provider built by ctor (once per subtest) against the
// Provider contract.
func Run(t *testing.T, ctor func(t *testing.T) agent.Provider, opts ...Option) {
	t.Helper()
	c := &config{prompt: "Say hello", parallel: 4, deadline: 30 * time.Second}
	for _, o := range opts {
		o(c)
	}
	request := func(t *testing.T, prompt string) *agent.Request {
		req := &agent.Request{SessionID: "conformance", NodeID: "conformance_node", Prompt: prompt,
			WorkDir: t.TempDir(), StageDir: t.TempDir(), AttemptID: "conformance/1"}
		if c.request != nil {
			c.request(t, req)
		}
		return req
	}

	t.Run("name", func(t *testing.T) {
		p := ctor(t)
		require.NotEmpty(t, p.Name())
		require.Equal(t, p.Name(), p.Name(), "the name is stable")
		if c.name != "" {
			require.Equal(t, c.name, p.Name())
		}
	})

	t.Run("successful run returns text", func(t *testing.T) {
		p := ctor(t)
		res, err := runBounded(t, c.deadline, func(ctx context.Context) (*agent.Result, error) {
			return p.Run(ctx, request(t, c.prompt), nil)
		})
		require.NoError(t, err)
		require.NotNil(t, res)
		require.True(t, res.Success, "the run succeeds")
		require.NotEmpty(t, res.Text)
		require.Contains(t, res.Text, c.want)
		require.GreaterOrEqual(t, res.Usage.InputTokens, int64(0))
		require.GreaterOrEqual(t, res.Usage.OutputTokens, int64(0))
		require.GreaterOrEqual(t, res.Usage.Cost, 0.0)
	})

	t.Run("events come from the calling goroutine, before Run returns", func(t *testing.T) {
		p := ctor(t)
		caller := goroutineID()
		var returned atomic.Bool
		var (
			mu     sync.Mutex
			bad    []string
			usage  agent.Usage
			usages int
		)
		res, err := p.Run(contextWithDeadline(t, c.deadline), request(t, c.prompt), func(ev agent.Event) {
			mu.Lock()
			defer mu.Unlock()
			if id := goroutineID(); id != caller {
				bad = append(bad, "event "+ev.Kind+" on goroutine "+strconv.FormatUint(id, 10)+", not the caller's "+strconv.FormatUint(caller, 10))
			}
			if returned.Load() {
				bad = append(bad, "event "+ev.Kind+" after Run returned")
			}
			switch ev.Kind {
			case "text", "status":
			case "tool_call":
				if ev.Tool == "" {
					bad = append(bad, "tool_call event without a tool")
				}
			case "usage":
				usage = usage.Add(ev.Usage)
				usages++
			default:
				bad = append(bad, "unknown event kind "+strconv.Quote(ev.Kind))
			}
		})
		returned.Store(true)
		require.NoError(t, err)
		mu.Lock()
		defer mu.Unlock()
		require.Empty(t, bad)
		if usages > 0 {
			require.Equal(t, res.Usage.InputTokens, usage.InputTokens, "usage events add up to the result's usage")
			require.Equal(t, res.Usage.OutputTokens, usage.OutputTokens, "usage events add up to the result's usage")
			require.InDelta(t, res.Usage.Cost, usage.Cost, 1e-9, "usage events add up to the result's usage")
		}
	})

	t.Run("nil onEvent", func(t *testing.T) {
		p := ctor(t)
		res, err := p.Run(contextWithDeadline(t, c.deadline), request(t, c.prompt), nil)
		require.NoError(t, err)
		require.True(t, res.Success)
	})

	t.Run("cancelled context", func(t *testing.T) {
		p := ctor(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := runBounded(t, c.deadline, func(context.Context) (*agent.Result, error) {
			return p.Run(ctx, request(t, c.prompt), nil)
		})
		require.ErrorIs(t, err, context.Canceled)
	})

	if c.hang != "" {
		t.Run("cancel during a run", func(t *testing.T) {
			p := ctor(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			started := make(chan struct{})
			var once sync.Once
			req := request(t, c.hang)
			done := make(chan error, 1)
			go func() {
				_, err := p.Run(ctx, req, func(agent.Event) { once.Do(func() { close(started) }) })
				done <- err
			}()
			// Cancel once the provider has shown signs of life, or at once
			// if it streams nothing before hanging.
			select {
			case <-started:
			case err := <-done:
				t.Fatalf("the hanging run returned before it was cancelled: %v", err)
			case <-time.After(200 * time.Millisecond): // bounds the wait for a first event; not a synchronisation
			}
			cancel()
			select {
			case err := <-done:
				require.Error(t, err)
				require.True(t, errors.Is(err, context.Canceled) || errors.Is(err, agent.ErrTerminal) || errors.Is(err, agent.ErrRetryable),
					"a cancelled run returns ctx's error or a classified one: %v", err)
			case <-time.After(c.deadline):
				t.Fatal("the run did not end after its context was cancelled")
			}
		})
	}

	t.Run("concurrent runs", func(t *testing.T) {
		p := ctor(t)
		errs := make(chan error, c.parallel)
		var wg sync.WaitGroup
		for i := 0; i < c.parallel; i++ {
			req := request(t, c.prompt)
			req.NodeID += "_" + strconv.Itoa(i)
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := p.Run(contextWithDeadline(t, c.deadline), req, func(agent.Event) {})
				if err == nil && (res == nil || res.Text == "") {
					err = errors.New("a concurrent run returned no text")
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
	})
}

// runBounded runs f and fails the test when it takes longer than d.
func runBounded(t *testing.T, d time.Duration, f func(ctx context.Context) (*agent.Result, error)) (*agent.Result, error) {
	t.Helper()
	ctx := contextWithDeadline(t, d)
	type ret struct {
		res *agent.Result
		err error
	}
	ch := make(chan ret, 1)
	go func() {
		res, err := f(ctx)
		ch <- ret{res, err}
	}()
	select {
	case r := <-ch:
		return r.res, r.err
	case <-time.After(d + 5*time.Second):
		t.Fatalf("the run did not return within %v", d)
		return nil, nil
	}
}

func contextWithDeadline(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// goroutineID is the id of the calling goroutine, read from its stack
// header ("goroutine 12 [running]:").
func goroutineID() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, _ := strconv.ParseUint(string(b), 10, 64)
	return id
}
