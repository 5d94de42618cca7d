package agent

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// InferProvider guesses the provider from a model name — always one of
// the agent CLIs: claude models → claude; gpt, o-series and codex models →
// codex; gemini models → gemini-cli; anything else → "". (The model APIs,
// openai, anthropic and gemini, are chosen with llm_provider.)
func InferProvider(model string) string {
	m := strings.ToLower(strings.TrimSpace(model))
	switch {
	case m == "":
		return ""
	case strings.HasPrefix(m, "claude") || strings.Contains(m, "opus") || strings.Contains(m, "sonnet") || strings.Contains(m, "haiku"):
		return "claude"
	case strings.HasPrefix(m, "gpt") || strings.HasPrefix(m, "o1") || strings.HasPrefix(m, "o3") || strings.HasPrefix(m, "o4") || strings.Contains(m, "codex"):
		return "codex"
	case strings.HasPrefix(m, "gemini"):
		return "gemini-cli"
	}
	return ""
}

// Registry holds providers by name. It is safe for concurrent use.
type Registry struct {
	mu        sync.RWMutex
	providers map[string]Provider
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{providers: map[string]Provider{}} }

// Register adds or replaces a provider.
func (r *Registry) Register(name string, p Provider) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.providers[name] = p
}

// Lookup returns the provider of that name.
func (r *Registry) Lookup(name string) (Provider, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if p, ok := r.providers[name]; ok {
		return p, nil
	}
	names := make([]string, 0, len(r.providers))
	for n := range r.providers {
		names = append(names, n)
	}
	sort.Strings(names)
	return nil, fmt.Errorf("agent: unknown provider %q (known: %s)", name, strings.Join(names, ", "))
}
