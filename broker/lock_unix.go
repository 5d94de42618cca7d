//go:build unix

package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// LockFile is the file in an embedded server's data directory that the
// serving process holds locked (and that names its pid).
const LockFile = "switchyard.lock"

// lockDir takes an exclusive lock on dir for this process: one embedded
// server per data directory, since two servers writing one JetStream store
// corrupt it. The lock is released by unlock, or by the kernel when the
// process ends, however it ends.
func lockDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("broker: data directory: %w", err)
	}
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("broker: data directory lock: %w", err)
	}
	if err := flockWithin(f, lockGrace); err != nil {
		data, _ := os.ReadFile(path)
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			who := "another process"
			if pid := strings.TrimSpace(string(data)); pid != "" {
				who = "process " + pid
			}
			return nil, fmt.Errorf("broker: data directory %s is in use by %s (one embedded server per directory: stop it, or reach its sessions with --nats)", dir, who)
		}
		return nil, fmt.Errorf("broker: data directory lock: %w", err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// lockGrace is how long lockDir waits for a lock that is held. A process
// that ends releases its lock at once, but a child it was starting (a tool's
// shell, between fork and exec) holds a copy of the descriptor, and so the
// lock, until it execs: a resume right after a crash can meet that lock for
// a moment. A directory really in use stays locked past the grace.
const lockGrace = 2 * time.Second

// flockWithin takes an exclusive lock on f, trying again for up to grace
// while another holds it.
func flockWithin(f *os.File, grace time.Duration) error {
	deadline := time.Now().Add(grace)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// unlock releases a lock taken by lockDir.
func unlock(f *os.File) {
	if f != nil {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	}
}
