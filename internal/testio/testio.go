// Package testio holds small I/O helpers shared by tests.
package testio

import (
	"bytes"
	"errors"
	"os/exec"
	"sync"
	"syscall"
)

// Killed reports whether err is the exit of a child process killed by
// SIGKILL (a crash point, internal/crash).
func Killed(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// SyncBuffer is a bytes.Buffer that one goroutine may write while another
// reads it (a server's log, a command's output).
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
