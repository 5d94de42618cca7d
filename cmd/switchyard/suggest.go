package main

import (
	"fmt"
	"sort"
	"strings"
)

// didYouMean is ` (did you mean "X"?)` for the candidate closest to word
// — the same ignoring case, or within an edit distance of a third of its
// length (at least 1) — and "" when none is close.
func didYouMean(word string, candidates []string) string {
	best, bestD := "", -1
	limit := max(1, len(word)/3)
	for _, c := range candidates {
		if c == "" {
			continue
		}
		d := editDistance(strings.ToLower(word), strings.ToLower(c))
		if d <= limit && (bestD < 0 || d < bestD || d == bestD && c < best) {
			best, bestD = c, d
		}
	}
	if bestD < 0 {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// sortedKeys lists a set's members in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
