// Package llmapi holds the agent providers that call model APIs directly,
// on the vendors' official Go SDKs: openai (the Responses API, or Chat
// Completions for any OpenAI-compatible server), anthropic (Messages) and
// gemini (the Gemini API). Keys and base URLs come from the vendors'
// standard environment variables (OPENAI_API_KEY, OPENAI_BASE_URL,
// ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, GEMINI_API_KEY, GEMINI_BASE_URL).
//
// A run sends the node's prompt, with its role's instructions as the
// system prompt, and streams the answer as text events; it reports the
// tokens used and their cost from the price table. The SDKs' own retries
// are off: a failed run returns a classified *agent.Error (rate_limit,
// server and network errors are retryable) carrying the server's
// Retry-After, and the node's retry policy retries it on the session's
// clock. The providers are safe for concurrent use; Run honours ctx.
//
// Package llmapitest is a local server that speaks the three wire formats,
// for tests.
package llmapi
