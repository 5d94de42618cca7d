// Package proc runs an agent CLI as a child process in a process group of
// its own: stdout is handed to the caller line by line on the caller's
// goroutine, the tail of stderr is kept for error messages, and when the
// caller's context ends the whole group is terminated (SIGTERM, then
// SIGKILL after a grace period) and reaped, so a hung agent and anything it
// started are gone when Run returns.
package proc
