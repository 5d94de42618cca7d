package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// MockResult is one scripted result of the mock provider.
type MockResult struct {
	Status           string            `json:"status"`
	PreferredLabel   string            `json:"preferred_label,omitempty"`
	SuggestedNextIDs []string          `json:"suggested_next_ids,omitempty"`
	ContextUpdates   map[string]string `json:"context_updates,omitempty"`
	Response         string            `json:"response,omitempty"`
	Notes            string            `json:"notes,omitempty"`
	Usage            *MockUsage        `json:"usage,omitempty"`
	// Error makes the run fail with a classified *Error of that Class:
	// "rate_limit", "network" and "server" are retryable; "auth",
	// "bad_request" and "unknown" are terminal.
	Error string `json:"error,omitempty"`
	// RetryAfter is the wait the scripted error asks for before a retry
	// (a duration: "30s"), as a server's Retry-After would.
	RetryAfter string `json:"retry_after,omitempty"`
}

// MockUsage is the usage a scripted result reports.
type MockUsage struct {
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	Cost         float64 `json:"cost"`
}

var mockStatuses = map[string]bool{"": true, "success": true, "fail": true, "partial_success": true, "retry": true, "skipped": true}

// mockClasses are the error classes a script may name.
var mockClasses = []Class{ClassRateLimit, ClassNetwork, ClassServer, ClassAuth, ClassBadRequest, ClassUnknown}

// customStatus is the form of a custom outcome value (DESIGN decision 7).
var customStatus = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)

func (r *MockResult) check() error {
	if !mockStatuses[strings.ToLower(r.Status)] && !customStatus.MatchString(r.Status) {
		return fmt.Errorf("bad status %q (success, fail, partial_success, retry, skipped, or a custom word)", r.Status)
	}
	if r.Error != "" && !slices.Contains(mockClasses, Class(r.Error)) {
		return fmt.Errorf("unknown error %q (rate_limit, network, server, auth, bad_request, unknown)", r.Error)
	}
	if r.RetryAfter != "" {
		if r.Error == "" {
			return errors.New("retry_after needs an error")
		}
		if d, err := time.ParseDuration(r.RetryAfter); err != nil || d < 0 {
			return fmt.Errorf("bad retry_after %q (a duration, e.g. 30s)", r.RetryAfter)
		}
	}
	if u := r.Usage; u != nil && (u.InputTokens < 0 || u.OutputTokens < 0 || u.Cost < 0) {
		return errors.New("usage must not be negative")
	}
	return nil
}

// Mock is the scripted provider: each run of a node takes the node's next
// scripted result, the last one repeating; nodes not in the script succeed
// with a canned response. It is safe for concurrent use.
type Mock struct {
	mu     sync.Mutex
	script map[string][]MockResult
	cursor map[string]int
	runs   map[string]int
}

var _ Provider = (*Mock)(nil)

// NewMock returns a mock provider with the given script (nil: always succeed).
func NewMock(script map[string][]MockResult) *Mock {
	return &Mock{script: script, cursor: map[string]int{}, runs: map[string]int{}}
}

// ParseMock reads a script: a JSON object mapping node ids to non-empty
// lists of results. Unknown fields are refused ("delay" too: the mock
// never sleeps), and so are malformed statuses and unknown error classes.
func ParseMock(data []byte) (*Mock, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var script map[string][]MockResult
	if err := dec.Decode(&script); err != nil {
		return nil, mockSyntaxError(data, err)
	}
	if dec.More() {
		return nil, errors.New("mock script: unexpected data after the JSON object")
	}
	nodes := make([]string, 0, len(script))
	for node := range script {
		nodes = append(nodes, node)
	}
	sort.Strings(nodes)
	for _, node := range nodes {
		list := script[node]
		if len(list) == 0 {
			return nil, fmt.Errorf("mock script: node %q has an empty list of results", node)
		}
		for i := range list {
			if err := list[i].check(); err != nil {
				return nil, fmt.Errorf("mock script: %s[%d]: %w", node, i, err)
			}
		}
	}
	return NewMock(script), nil
}

// mockSyntaxError explains a decoding error, with a line and column when
// the decoder knows the offset.
func mockSyntaxError(data []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	var off int64 = -1
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
		err = fmt.Errorf("%s must be %s, not a JSON %s", orDefault(te.Field, "the script"), mockTypeName(te.Type.String()), te.Value)
	case strings.Contains(err.Error(), "unknown field \"delay\""):
		return errors.New("mock script: \"delay\" is not supported (the mock never sleeps)")
	case errors.Is(err, io.EOF):
		return errors.New("mock script: empty file")
	}
	if off < 0 {
		return fmt.Errorf("mock script: %v", err)
	}
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	col := int(off) - bytes.LastIndexByte(data[:off], '\n')
	return fmt.Errorf("mock script: line %d, column %d: %v", line, col, err)
}

func mockTypeName(t string) string {
	switch {
	case strings.HasPrefix(t, "map[string][]"):
		return "an object of node ids to lists of results"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map"), strings.Contains(t, "Mock"):
		return "an object"
	}
	return "a " + t
}

// LoadMockFile reads a script file.
func LoadMockFile(path string) (*Mock, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m, err := ParseMock(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// Name is "mock".
func (m *Mock) Name() string { return "mock" }

// Runs returns how many times the node has run.
func (m *Mock) Runs(node string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.runs[node]
}

// Run returns the node's next scripted result.
func (m *Mock) Run(ctx context.Context, req *Request, onEvent func(Event)) (*Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.runs[req.NodeID]++
	list := m.script[req.NodeID]
	var r MockResult
	scripted := len(list) > 0
	if scripted {
		i := m.cursor[req.NodeID]
		if i >= len(list) {
			i = len(list) - 1
		}
		r = list[i]
		m.cursor[req.NodeID] = i + 1
	}
	m.mu.Unlock()
	if !scripted {
		// The canned answer names the node, quotes its task and fingerprints
		// the whole prompt: different inputs give different outputs, as an
		// agent's would (stall detection compares outputs).
		first, _, _ := strings.Cut(strings.TrimSpace(lastParagraph(req.Prompt)), "\n")
		sum := sha256.Sum256([]byte(req.Prompt))
		r = MockResult{Status: "success", Response: fmt.Sprintf("[mock] %s: done: %s (prompt %x)", req.NodeID, first, sum[:4])}
	}
	if r.Error != "" {
		c := Class(r.Error)
		wait, _ := time.ParseDuration(r.RetryAfter) // checked when loaded
		return nil, &Error{Provider: "mock", Class: c, Retryable: c.Retryable(), RetryAfter: wait,
			Msg: fmt.Sprintf("scripted %s error for node %s", c, req.NodeID)}
	}
	res := &Result{Text: r.Response, Success: !strings.EqualFold(r.Status, "fail"), Status: r.Status,
		PreferredLabel: r.PreferredLabel, SuggestedNextIDs: r.SuggestedNextIDs,
		ContextUpdates: r.ContextUpdates, Notes: r.Notes, SessionID: "mock-" + req.NodeID}
	if res.Text == "" {
		res.Text = fmt.Sprintf("[mock] %s: %s", req.NodeID, strings.ToLower(orDefault(r.Status, "success")))
	}
	if u := r.Usage; u != nil {
		res.Usage = Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, Cost: u.Cost}
	}
	if onEvent != nil {
		onEvent(Event{Kind: "text", Text: res.Text})
		if res.Usage != (Usage{}) {
			onEvent(Event{Kind: "usage", Usage: res.Usage})
		}
	}
	return res, nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// lastParagraph is the node's own prompt at the end of the built prompt.
func lastParagraph(p string) string {
	p = strings.TrimSpace(p)
	if i := strings.LastIndex(p, "\n\n"); i >= 0 {
		return p[i+2:]
	}
	return p
}

// Nodes lists the node ids the script names, sorted.
func (m *Mock) Nodes() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.script))
	for n := range m.script {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
