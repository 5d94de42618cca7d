// Package agent defines how Switchyard drives coding agents: the Provider
// interface, the Request it runs and the Result and streamed Events it
// returns, the classified Error of a failed run, and the built-in
// providers: the scripted Mock (switchyard run --mock FILE), the claude,
// codex and gemini CLIs (claude, codex, gemini-cli), and a generic command.
// The providers that call model APIs (openai, anthropic, gemini) are in
// package llmapi.
//
// Providers are called by the codergen and conditional node handlers
// (package nodes) on a goroutine of the node's own; they must honour ctx,
// call onEvent only from the calling goroutine, and be safe for concurrent
// use. Package agenttest holds the conformance checks every provider runs.
package agent
