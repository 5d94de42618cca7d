package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"strings"
)

// Price is what a model costs, in US dollars per million tokens.
type Price struct {
	Input       float64 `json:"input"`
	CachedInput float64 `json:"cached_input,omitempty"` // 0 = same as Input
	Output      float64 `json:"output"`
}

// Prices maps model names to prices. A key ending in "*" matches every
// model name with that prefix; an exact name wins over patterns, and a
// longer pattern over a shorter one. Provider CLIs that report their own
// cost (Claude Code's total_cost_usd) do not use the table.
type Prices map[string]Price

// DefaultPrices returns the built-in table: list prices of common models
// when this was written. Override them with LoadPrices.
func DefaultPrices() Prices {
	return Prices{
		"claude-opus-4*":         {Input: 15, CachedInput: 1.5, Output: 75},
		"claude-opus-4-5*":       {Input: 5, CachedInput: 0.5, Output: 25},
		"claude-opus-4-6*":       {Input: 5, CachedInput: 0.5, Output: 25},
		"claude-sonnet-4*":       {Input: 3, CachedInput: 0.3, Output: 15},
		"claude-haiku-4*":        {Input: 1, CachedInput: 0.1, Output: 5},
		"claude-3-5-haiku*":      {Input: 0.8, CachedInput: 0.08, Output: 4},
		"opus":                   {Input: 5, CachedInput: 0.5, Output: 25},
		"sonnet":                 {Input: 3, CachedInput: 0.3, Output: 15},
		"haiku":                  {Input: 1, CachedInput: 0.1, Output: 5},
		"gpt-5*":                 {Input: 1.25, CachedInput: 0.125, Output: 10},
		"gpt-5-mini*":            {Input: 0.25, CachedInput: 0.025, Output: 2},
		"gpt-5-nano*":            {Input: 0.05, CachedInput: 0.005, Output: 0.4},
		"gpt-4.1*":               {Input: 2, CachedInput: 0.5, Output: 8},
		"o3*":                    {Input: 2, CachedInput: 0.5, Output: 8},
		"o4-mini*":               {Input: 1.1, CachedInput: 0.275, Output: 4.4},
		"codex-mini*":            {Input: 1.5, CachedInput: 0.375, Output: 6},
		"gemini-2.5-pro*":        {Input: 1.25, CachedInput: 0.31, Output: 10},
		"gemini-2.5-flash*":      {Input: 0.3, CachedInput: 0.075, Output: 2.5},
		"gemini-2.5-flash-lite*": {Input: 0.1, CachedInput: 0.025, Output: 0.4},
	}
}

// ParsePrices reads a price table: a JSON object mapping model names (or
// "prefix*" patterns) to {"input": …, "cached_input": …, "output": …} in
// US dollars per million tokens.
func ParsePrices(data []byte) (Prices, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p Prices
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("prices: %v", err)
	}
	for name, pr := range p {
		if strings.TrimSpace(name) == "" || strings.Count(name, "*") > 1 || (strings.Contains(name, "*") && !strings.HasSuffix(name, "*")) {
			return nil, fmt.Errorf("prices: bad model name %q (a name, or a prefix ending in *)", name)
		}
		if pr.Input < 0 || pr.Output < 0 || pr.CachedInput < 0 {
			return nil, fmt.Errorf("prices: %s: negative price", name)
		}
	}
	return p, nil
}

// LoadPrices reads a price table file and returns the built-in table with
// the file's entries added or replacing built-in ones.
func LoadPrices(path string) (Prices, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p, err := ParsePrices(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return DefaultPrices().Merge(p), nil
}

// Merge returns a copy of p with o's entries added or replacing p's.
func (p Prices) Merge(o Prices) Prices {
	out := maps.Clone(p)
	if out == nil {
		out = Prices{}
	}
	maps.Copy(out, o)
	return out
}

// Lookup returns the price of a model: an exact entry, else the longest
// matching pattern.
func (p Prices) Lookup(model string) (Price, bool) {
	m := strings.ToLower(strings.TrimSpace(model))
	if m == "" {
		return Price{}, false
	}
	if pr, ok := p[m]; ok {
		return pr, true
	}
	best, found := -1, Price{}
	for k, pr := range p {
		prefix, ok := strings.CutSuffix(strings.ToLower(k), "*")
		if ok && strings.HasPrefix(m, prefix) && len(prefix) > best {
			best, found = len(prefix), pr
		}
	}
	return found, best >= 0
}

// Cost returns the cost of a run of model in US dollars: input counts all
// input tokens, cachedInput those of them read from a prompt cache. ok is
// false when the table has no price for the model.
func (p Prices) Cost(model string, input, cachedInput, output int64) (cost float64, ok bool) {
	pr, ok := p.Lookup(model)
	if !ok {
		return 0, false
	}
	cachedIn := min(max(cachedInput, 0), input)
	cachedPrice := pr.CachedInput
	if cachedPrice == 0 {
		cachedPrice = pr.Input
	}
	cost = (float64(input-cachedIn)*pr.Input + float64(cachedIn)*cachedPrice + float64(output)*pr.Output) / 1e6
	return cost, true
}
