package agent

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Class is the category of an agent error (the spec's error categories).
type Class string

// Error classes. RateLimit, Network and Server are retryable; Auth and
// BadRequest are terminal; Unknown is terminal too (the CLI failed and
// said nothing we recognise, so running it again would most likely fail
// the same way).
const (
	ClassRateLimit  Class = "rate_limit"
	ClassNetwork    Class = "network"
	ClassServer     Class = "server"
	ClassAuth       Class = "auth"
	ClassBadRequest Class = "bad_request"
	ClassUnknown    Class = "unknown"
)

// Retryable reports whether errors of the class are retried under the
// node's retry policy.
func (c Class) Retryable() bool {
	return c == ClassRateLimit || c == ClassNetwork || c == ClassServer
}

// statusCode finds an HTTP status in a message: after a word that
// introduces one ("status 429", "API Error: 401", "code: 503") or before
// its reason phrase ("429 Too Many Requests").
var statusCode = regexp.MustCompile(`(?i)(?:status(?:\s*code)?|code|error|http(?:/\d(?:\.\d)?)?)\W{0,4}\b([45]\d\d)\b|\b([45]\d\d)\s+(?:too many|unauthori|forbidden|bad request|not found|internal|service unavailable|bad gateway|gateway|overloaded)`)

// The word patterns are checked in order after status codes: auth before
// rate limits (a 401 body may mention limits), rate limits before servers
// ("overloaded" is a capacity answer).
var classPatterns = []struct {
	class Class
	re    *regexp.Regexp
}{
	{ClassAuth, regexp.MustCompile(`(?i)unauthori[sz]ed|forbidden|invalid[ _-]?(x-)?api[ _-]?key|api[ _-]?key[^.\n]{0,40}(not valid|invalid|missing|not (found|set)|required|expired)|(must specify|set) the \w*api[ _-]?key|authentication|not (logged|signed) in|please (run )?/?login|oauth token|invalid credentials|credentials (are )?(missing|invalid|expired)`)},
	{ClassRateLimit, regexp.MustCompile(`(?i)rate[ _-]?limit|too many requests|overloaded|quota|resource[ _]exhausted|usage limit`)},
	{ClassBadRequest, regexp.MustCompile(`(?i)bad request|invalid[ _]request|invalid argument|context (length|window)|prompt is too long|unknown model|model[^.\n]{0,60}not (found|supported|exist)`)},
	{ClassServer, regexp.MustCompile(`(?i)internal server error|service unavailable|bad gateway|gateway time-?out|server error|api_error`)},
	{ClassNetwork, regexp.MustCompile(`(?i)econnreset|econnrefused|etimedout|enotfound|eai_again|connection (reset|refused|closed|error)|network|timed out|timeout|socket hang up|dns|tls handshake|stream disconnected|fetch failed|unreachable`)},
}

// ClassifyMessage returns the class an error message names, or
// ClassUnknown: an HTTP status in it decides (401/403 auth, 429/529 rate
// limit, other 4xx bad request, 5xx server), else words do.
func ClassifyMessage(msg string) Class {
	if m := statusCode.FindStringSubmatch(msg); m != nil {
		code, _ := strconv.Atoi(m[1] + m[2])
		return ClassifyStatus(code)
	}
	for _, p := range classPatterns {
		if p.re.MatchString(msg) {
			return p.class
		}
	}
	return ClassUnknown
}

// ClassifyStatus returns the class of an HTTP error status: 401/403 auth,
// 408 network (the request timed out), 429/529 rate limit, other 4xx bad
// request, 5xx server; ClassUnknown for anything else.
func ClassifyStatus(code int) Class {
	switch {
	case code == 401 || code == 403:
		return ClassAuth
	case code == 408:
		return ClassNetwork
	case code == 429 || code == 529:
		return ClassRateLimit
	case code >= 400 && code < 500:
		return ClassBadRequest
	case code >= 500 && code < 600:
		return ClassServer
	}
	return ClassUnknown
}

// ClassError builds the classified error of a failed run: the class is
// taken from the first message that names one (messages from the CLI's
// own error events first, stderr last); the error's text is the first
// non-empty message, which is the CLI's own words.
func ClassError(provider string, messages ...string) *Error {
	class := ClassUnknown
	for _, m := range messages {
		if c := ClassifyMessage(m); c != ClassUnknown {
			class = c
			break
		}
	}
	msg := ""
	for _, m := range messages {
		if m = strings.TrimSpace(m); m != "" {
			msg = m
			break
		}
	}
	if msg == "" {
		msg = "the agent failed without a message"
	}
	return &Error{Provider: provider, Retryable: class.Retryable(),
		Msg: fmt.Sprintf("%s: %s", class, clip(msg, 2000)), Class: class}
}

// clip shortens s to at most n bytes, keeping the end (where CLIs put the
// final error) and marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// lastLines returns the last n non-empty lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	var out []string
	for i := len(lines) - 1; i >= 0 && len(out) < n; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			out = append(out, l)
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return strings.Join(out, "\n")
}
